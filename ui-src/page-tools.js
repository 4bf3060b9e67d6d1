// Buttons a page offers only where a script can do their work. They are `hidden` in the
// HTML, so that without JavaScript nothing is offered that would not work; the page says
// every word (data attributes), as the islands' pages do.
//   <button data-copy="#list" data-status="#status" data-copied="…" data-copy-failed="…">
//       copies the text of each <code> inside #list, one a line, and says how it went
//   <button data-print>   opens the browser's print dialog (the print stylesheet shows
//       what matters on paper: app.css)

for (const button of document.querySelectorAll("button[data-copy]")) {
  if (!navigator.clipboard?.writeText) continue;
  button.hidden = false;
  button.addEventListener("click", async () => {
    const source = document.querySelector(button.dataset.copy);
    const status = document.querySelector(button.dataset.status);
    const lines = [...(source?.querySelectorAll("code") ?? [])].map((code) => code.textContent.trim());
    try {
      await navigator.clipboard.writeText(lines.join("\n") + "\n");
      if (status) status.textContent = button.dataset.copied;
    } catch {
      if (status) status.textContent = button.dataset.copyFailed;
    }
  });
}

for (const button of document.querySelectorAll("button[data-print]")) {
  if (typeof window.print !== "function") continue;
  button.hidden = false;
  button.addEventListener("click", () => window.print());
}
