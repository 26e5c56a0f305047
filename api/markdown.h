/*
 * markdown.h - a model card (Markdown) as a small JSON tree the web UI builds DOM nodes
 * from, so that no page ever parses server text as markup.
 *
 * cmark (the CommonMark reference implementation, Debian's libcmark) parses; this module
 * walks its tree and keeps only what a model card needs. Raw HTML (blocks and inline) is
 * dropped; a link or image survives as a link only when its URL is http:, https: or
 * mailto: (anything else, javascript: and data: included, keeps its text and loses the
 * link); images never load: they become links to the image with the alt text.
 *
 * The tree: {"t":TYPE, "c":[children]} for containers (document, paragraph, heading with
 * "level", block_quote, list with "ordered" and "start", item, emph, strong, link with
 * "href" and "title", span for a link whose URL was dropped) and leaves text/code/
 * code_block with "text" (code_block also "info"), softbreak, linebreak, thematic_break.
 * Nesting deeper than SRV_MD_MAX_DEPTH is flattened into the deepest container kept.
 */
#ifndef SRV_MARKDOWN_H
#define SRV_MARKDOWN_H

#include <stddef.h>

#include <jansson.h>

#define SRV_MD_MAX_DEPTH 24

/* Parse `len` bytes of Markdown (UTF-8; invalid bytes become U+FFFD in cmark). Returns a
 * new reference to the tree, or NULL when out of memory. Thread-safe (no shared state). */
json_t *srv_markdown_doc(const char *md, size_t len);

/* Whether a link URL may become a link: http:, https: or mailto: (any case). */
int srv_markdown_url_ok(const char *url);

#endif
