// The error page island: the server's content for the code (what happened, what to do
// next, the reference), plus what only the browser can add: the provider this browser
// last used, and a button that copies the reference for a support request.
import { useState } from "react";
import { readLastUsed } from "../chooser/lastUsed.js";

/** view: the page model the server rendered (see webapp/auth/errorpage.py). */
export function ErrorPage({ view, storage, clipboard }) {
  const [lastUsed] = useState(() => readLastUsed(storage));
  const [copied, setCopied] = useState("");

  async function copy() {
    try {
      await clipboard.writeText(view.requestId);
      setCopied("Reference copied.");
    } catch {
      setCopied("Could not copy; select the reference and copy it yourself.");
    }
  }

  return (
    <div data-island="error-page" data-code={view.code ?? ""}>
      <h1 id="card-title">{view.title}</h1>
      <p>{view.message}</p>
      <p>{view.action}</p>
      {view.retry && lastUsed && (
        <p className="muted">Last time you signed in here with {lastUsed.name}.</p>
      )}
      <ul className="steps">
        {view.steps.map((step, index) => (
          <li key={step.href + step.label}>
            <a className={index === 0 ? "button" : "button button--secondary"} href={step.href}>
              {step.label}
            </a>
          </li>
        ))}
      </ul>
      <p className="reference">
        Reference: <code>{view.requestId}</code>
        {view.code && <> · code <code>{view.code}</code></>}
        {clipboard && (
          <>
            {" "}
            <button type="button" className="link-button" onClick={copy}>Copy reference</button>
          </>
        )}
      </p>
      <p className="small muted" aria-live="polite">{copied}</p>
    </div>
  );
}
