"""Sources the knowledge base stays in sync with: a server folder, a list of URLs, a
sitemap, an S3 bucket prefix (``model``: what a source is; ``listers``: what it holds
now; ``sync``: one sync; ``worker``: syncs on schedule)."""
