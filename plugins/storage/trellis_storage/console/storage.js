// Storage page: a thumbnail beside each image in the files list, through the transform route (a 64 px WebP,
// computed once and then served from the storage's cache). The admin's credentials travel in a header, which
// an <img src> cannot send: each thumbnail is fetched with them and shown as a data: URL.
import { api, el, lists, onReady } from "/console/static/console.js";

const THUMBNAIL = "width=64&height=64&fit=cover&format=webp";
const IMAGES = new Set(["image/jpeg", "image/png", "image/webp", "image/gif"]);

function dataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

async function addThumbnail(cell, file) {
  const response = await api("GET", `/storage/download/${file._id}?${THUMBNAIL}`, undefined, { raw: true });
  if (!(response instanceof Response)) return; // not an image that can be transformed: the name alone
  const image = el("img", { class: "thumbnail", alt: "", width: "32", height: "32", src: await dataUrl(await response.blob()) });
  cell.prepend(image, " ");
}

onReady(() => {
  const files = lists.get("files");
  files.root.addEventListener("loaded", () => {
    [...files.body.rows].forEach((tr, index) => {
      const file = files.rows[index];
      if (file && IMAGES.has(file.contentType)) addThumbnail(tr.cells[0], file);
    });
  });
});
