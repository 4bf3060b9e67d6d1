// The error page island: the server's content for the code (what happened, what to do
// next, the reference, the provider of this browser's last sign-in that worked), plus what
// only the browser can add: a button that copies the reference for a support request.
import { useState } from "react";
import { fill } from "../text.js";

/** view: the page model the server rendered, its words included (webapp/web/islands/error_page.py). */
export function ErrorPage({ view, clipboard }) {
  const [copied, setCopied] = useState("");
  const text = view.text;
  const reference = <code key="reference">{view.requestId}</code>;

  async function copy() {
    try {
      await clipboard.writeText(view.requestId);
      setCopied(text.copied);
    } catch {
      setCopied(text.copyFailed);
    }
  }

  return (
    <div data-island="error-page" data-code={view.code ?? ""}>
      <h1 id="card-title">{view.title}</h1>
      <p>{view.message}</p>
      <p>{view.action}</p>
      {view.retry && view.lastUsed && (
        <p className="muted">{fill(text.lastUsed, { name: view.lastUsed })}</p>
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
        {view.code
          ? fill(text.referenceAndCode, { reference, code: <code key="code">{view.code}</code> })
          : fill(text.reference, { reference })}
        {clipboard && (
          <>
            {" "}
            <button type="button" className="link-button" onClick={copy}>{text.copy}</button>
          </>
        )}
      </p>
      <p className="small muted" aria-live="polite">{copied}</p>
    </div>
  );
}
