// Email page: a message of the outbox opened, its body shown as text with its links clickable. The body
// is parsed into an inert document (DOMParser runs no script) and rebuilt from text nodes and http(s)
// links only, so nothing of the mail's HTML reaches the page as HTML. (Chromium still reports an inline
// event handler in the mail as a CSP violation while parsing it; the page's CSP blocks it either way.)
import { actions, el } from "/console/static/console.js";

const BLOCKS = new Set(["P", "DIV", "LI", "TR", "H1", "H2", "H3", "H4", "H5", "H6", "BLOCKQUOTE", "TABLE", "UL", "OL"]);

function safeHref(href) {
  try {
    const url = new URL(href, window.location.href);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

/** The nodes of the page that show ``node``: text, links, line breaks and paragraphs, nothing else. */
function rebuild(node) {
  if (node.nodeType === Node.TEXT_NODE) return [document.createTextNode(node.textContent)];
  if (node.nodeType !== Node.ELEMENT_NODE || node.tagName === "SCRIPT" || node.tagName === "STYLE") return [];
  const children = [...node.childNodes].flatMap(rebuild);
  if (node.tagName === "A") {
    const href = safeHref(node.getAttribute("href") || "");
    return href ? [el("a", { href, target: "_blank", rel: "noopener noreferrer" }, node.textContent || href)] : children;
  }
  if (node.tagName === "BR") return [el("br")];
  return BLOCKS.has(node.tagName) ? [el("p", {}, children)] : children;
}

actions.openMessage = (message) => {
  const panel = document.getElementById("message");
  const body = new DOMParser().parseFromString(message.body || "", "text/html").body;
  panel.querySelector("[data-message=subject]").textContent = message.subject;
  panel.querySelector("[data-message=to]").textContent = message.to;
  panel.querySelector("[data-message=status]").textContent = message.status;
  panel.querySelector("[data-message=body]").replaceChildren(...rebuild(body));
  panel.hidden = false;
  panel.scrollIntoView({ block: "nearest" });
};
