"""Documents behind the document API: the knowledge base with its catalog rows and original
files (``library``), upload jobs run fairly per owner (``jobs``, ``scheduler``) and named
sets of documents (``collections``). Above ``knowledge_base``: it reads through the facade."""
