// Mounts the error page island over the server-rendered error page (same content).
import { createRoot } from "react-dom/client";
import { ErrorPage } from "./ErrorPage.jsx";

const container = document.getElementById("error-page");
const data = document.getElementById("error-page-data");
if (container && data) {
  const view = JSON.parse(data.textContent);
  createRoot(container).render(<ErrorPage view={view} clipboard={navigator.clipboard} />);
}
