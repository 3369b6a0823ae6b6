// Answers are Markdown rendered by the vendored marked; what reaches the page is only the
// HTML rendered Markdown needs (an allow-list), so a model's or a document's HTML is data.
// Not on the list, so removed: images, video, audio, area, track (each would load from
// anywhere: the CSP stops that too, but nothing should depend on it alone), scripts,
// handlers, forms, styles, SVG; attributes such as background, poster, src, style, class.

import { marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.js";

// What marked (GFM) writes for Markdown, without images and task-list checkboxes.
export const ALLOWED_TAGS = [
  "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre",
  "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
];
// Links (href, title), a list's first number (start), a table column's alignment (align).
export const ALLOWED_ATTR = ["href", "title", "start", "align"];
const PURIFY = { ALLOWED_TAGS, ALLOWED_ATTR, ALLOW_DATA_ATTR: false, RETURN_DOM_FRAGMENT: true };

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.getAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** ``html`` with only the allow-listed tags and attributes, as a fragment. */
export function sanitize(html) {
  return DOMPurify.sanitize(html, PURIFY);
}

/** ``text`` (Markdown) as a sanitized fragment. */
export function markdown(text) {
  return sanitize(marked.parse(String(text || ""), { gfm: true, breaks: true, async: false }));
}
