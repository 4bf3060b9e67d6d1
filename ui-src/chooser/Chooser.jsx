// The sign-in provider chooser island: enhances the server-rendered list of providers.
import { useEffect, useRef, useState } from "react";
import { FILTER_THRESHOLD, PASSKEY_TYPE, REDIRECT_TYPES, emailProblem, filterProviders, orderProviders } from "./model.js";
import * as ceremony from "../passkey/ceremony.js";
import { fill } from "../text.js";

/**
 * providers: the `GET providers` entries in order; csrfToken: from `GET csrf`;
 * page: what only the page knows (callbackUrl, error text, logos, credentials fields,
 * e-mail prefill, passkeyProblem, `lastUsed`: the provider of this browser's last sign-in
 * that worked, as the server saw it succeed, and the island's words in `text`, see
 * webapp/web/islands/provider_chooser.py); submitInPlace(form): sends a form and swaps the answer
 * in (htmx), or is absent, and the browser submits normally; passkeys: the passkey
 * ceremonies (ui-src/passkey/ceremony.js; tests pass their own).
 */
export function Chooser({ providers, csrfToken, page, submitInPlace, passkeys = ceremony }) {
  // Set by the server once a sign-in has worked: a click here is only an attempt.
  const lastUsed = page.lastUsed ?? null;
  const [query, setQuery] = useState("");
  const [pendingId, setPendingId] = useState(null);
  const [announcement, setAnnouncement] = useState("");
  const listRef = useRef(null);
  const text = page.text;

  // Coming back with the Back button restores the page from the cache, pending state and
  // all; the person must be able to choose again.
  useEffect(() => {
    const reset = (event) => event.persisted && setPendingId(null);
    window.addEventListener("pageshow", reset);
    return () => window.removeEventListener("pageshow", reset);
  }, []);

  // Filled after mounting, so screen readers announce it as a change.
  useEffect(() => {
    if (page.error) setAnnouncement(`${page.error.title}. ${page.error.message} ${page.error.action}`);
  }, [page.error]);

  const redirecting = orderProviders(
    providers.filter((p) => REDIRECT_TYPES.has(p.type)),
    lastUsed?.id,
  );
  const forms = providers.filter((p) => !REDIRECT_TYPES.has(p.type) && p.type !== PASSKEY_TYPE);
  const passkey = providers.find((p) => p.type === PASSKEY_TYPE);
  // Only where it can work: a browser with passkeys, at an address they accept.
  const [passkeysWork] = useState(() => Boolean(passkey) && !page.passkeyProblem && passkeys.passkeysSupported());
  const showFilter = providers.length > FILTER_THRESHOLD;
  const visible = showFilter ? filterProviders(redirecting, query) : redirecting;

  function start(provider) {
    return (event) => {
      if (pendingId) {
        event.preventDefault(); // a second click while the first is on its way
        return false;
      }
      setPendingId(provider.id);
      return true;
    };
  }

  function moveFocus(event) {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    const buttons = [...listRef.current.querySelectorAll("button:not([disabled])")];
    if (!buttons.length) return;
    event.preventDefault();
    const at = buttons.indexOf(document.activeElement);
    const step = event.key === "ArrowDown" ? 1 : -1;
    const next = at === -1 ? (step === 1 ? 0 : buttons.length - 1) : at + step;
    buttons[Math.max(0, Math.min(buttons.length - 1, next))].focus();
  }

  function onFilterKey(event) {
    if (event.key === "Escape") setQuery("");
    else if (event.key === "Enter" && visible.length === 1) {
      event.preventDefault();
      listRef.current.querySelector("button")?.click();
    } else moveFocus(event);
  }

  const hidden = (
    <>
      <input type="hidden" name="csrfToken" value={csrfToken} />
      {page.callbackUrl && <input type="hidden" name="callbackUrl" value={page.callbackUrl} />}
    </>
  );

  return (
    <div className="providers" data-island="chooser" aria-busy={pendingId ? "true" : "false"}>
      <div className={page.error ? "alert" : "visually-hidden"} role="alert" data-error-code={page.error?.code}>
        {announcement && page.error && (
          <>
            <p className="alert__title">{page.error.title}</p>
            <p>{page.error.message} {page.error.action}</p>
          </>
        )}
        {announcement && !page.error && <p>{announcement}</p>}
      </div>

      {showFilter && (
        <div className="stack">
          <label htmlFor="provider-filter">{text.filterLabel}</label>
          <input
            id="provider-filter"
            type="search"
            value={query}
            autoComplete="off"
            aria-controls="provider-list"
            aria-describedby="provider-count"
            onChange={(e) => setQuery(e.target.value)}
            onKeyDown={onFilterKey}
          />
          <p id="provider-count" className="muted small" aria-live="polite">
            {visible.length === redirecting.length
              ? text.providerCount
              : fill(text.matchCount, { shown: visible.length, total: redirecting.length })}
          </p>
        </div>
      )}

      <ul id="provider-list" className="provider-list" ref={listRef} onKeyDown={moveFocus}>
        {visible.map((p) => {
          const isLast = p.id === lastUsed?.id;
          const logo = page.logos?.[p.id];
          return (
            <li key={p.id}>
              <form method="post" action={p.signinUrl} onSubmit={start(p)}>
                {hidden}
                <button type="submit" className="button button--provider" data-provider={p.id} disabled={Boolean(pendingId)}>
                  {logo && <img src={logo} alt="" width="20" height="20" />}
                  <span>
                    {fill(pendingId === p.id ? text.redirecting : isLast ? text.continueWith : text.signInWith, { name: p.name })}
                  </span>
                  {isLast && <span className="badge">{text.lastUsed}</span>}
                </button>
              </form>
            </li>
          );
        })}
      </ul>
      {showFilter && visible.length === 0 && <p className="muted">{fill(text.noMatch, { query })}</p>}

      {forms.map((p, index) => (
        <div key={p.id}>
          {(index > 0 || redirecting.length > 0) && (
            <div className="divider" role="separator"><span>{text.or}</span></div>
          )}
          {p.type === "email" ? (
            <EmailForm provider={p} page={page} hidden={hidden} pendingId={pendingId}
              isLast={p.id === lastUsed?.id} start={start(p)} submitInPlace={submitInPlace}
              webauthn={passkeysWork}
              onFailure={(message) => { setPendingId(null); setAnnouncement(message); }} />
          ) : (
            <CredentialsForm provider={p} page={page} hidden={hidden} pendingId={pendingId}
              isLast={p.id === lastUsed?.id} start={start(p)} webauthn={passkeysWork} />
          )}
        </div>
      ))}

      {passkey && (passkeysWork || page.passkeyProblem) && (
        <div>
          {(forms.length > 0 || redirecting.length > 0) && (
            <div className="divider" role="separator"><span>{text.or}</span></div>
          )}
          {passkeysWork ? (
            <PasskeySignIn provider={passkey} page={page} csrfToken={csrfToken} passkeys={passkeys}
              pendingId={pendingId} setPendingId={setPendingId} />
          ) : (
            <p className="muted small">{page.passkeyProblem}</p>
          )}
        </div>
      )}
    </div>
  );
}

/**
 * "Sign in with a passkey": the browser's passkey dialog on a click and, where the browser
 * supports it, its passkeys among the e-mail field's suggestions (conditional UI) from the
 * start. A cancelled dialog leaves the page as it was, with a short message.
 */
function PasskeySignIn({ provider, page, csrfToken, passkeys, pendingId, setPendingId }) {
  const [problem, setProblem] = useState(null);
  const [round, setRound] = useState(0);
  const text = page.text;
  const request = { authBase: page.authBase, csrfToken, callbackUrl: page.callbackUrl, text: text.passkey };

  // Conditional UI: wait for the person to pick a passkey from the field's suggestions.
  // A dialog opened by the button aborts this wait; it starts again afterwards (round).
  useEffect(() => {
    let live = true;
    (async () => {
      if (!(await passkeys.autofillSupported())) return;
      if (!live || !document.querySelector("input[autocomplete$='webauthn']")) return;
      try {
        const url = await passkeys.signInWithPasskey({ ...request, autofill: true });
        if (live) passkeys.go(url);
      } catch (error) {
        // Only the server's answer is worth saying; the browser's own endings are quiet.
        if (live && error instanceof passkeys.PasskeyProblem) setProblem(error.message);
      }
    })();
    return () => {
      live = false;
    };
  }, [round]);

  async function onClick() {
    if (pendingId) return;
    setPendingId(provider.id);
    setProblem(null);
    try {
      passkeys.go(await passkeys.signInWithPasskey(request));
    } catch (error) {
      setPendingId(null);
      setProblem(passkeys.problemMessage(error, text.passkey));
      setRound((n) => n + 1);
    }
  }

  return (
    <div className="stack">
      <button type="button" className="button button--secondary" data-provider={provider.id}
        disabled={Boolean(pendingId)} aria-describedby={problem ? "passkey-problem" : undefined} onClick={onClick}>
        {pendingId === provider.id ? text.passkeyWaiting : text.passkeyButton}
      </button>
      {problem && <p id="passkey-problem" className="field-error" role="alert">{problem}</p>}
    </div>
  );
}

function SubmitButton({ provider, text, pendingId, isLast, busyText, secondary = false }) {
  return (
    <button type="submit" className={secondary ? "button button--secondary" : "button"} disabled={Boolean(pendingId)}>
      {pendingId === provider.id ? busyText : fill(text.signInWith, { name: provider.name })}
      {isLast && <span className="badge badge--inverse">{text.lastUsed}</span>}
    </button>
  );
}

function EmailForm({ provider, page, hidden, pendingId, isLast, start, submitInPlace, onFailure, webauthn }) {
  const [email, setEmail] = useState(() => page.typed?.[`email-${provider.id}`] ?? page.email ?? "");
  const [problem, setProblem] = useState(null);
  const [touched, setTouched] = useState(false);
  const inputId = `email-${provider.id}`;
  const text = page.text;
  const problemText = problem && text.emailProblems[problem];

  function onSubmit(event) {
    const found = emailProblem(email);
    if (found) {
      event.preventDefault();
      setTouched(true);
      setProblem(found);
      event.currentTarget.elements.email.focus();
      return;
    }
    if (!start(event)) return;
    if (submitInPlace) {
      event.preventDefault();
      submitInPlace(event.currentTarget).catch(() =>
        onFailure(text.offline),
      );
    }
  }

  return (
    <form method="post" action={provider.signinUrl} className="stack" noValidate onSubmit={onSubmit}>
      {hidden}
      <label htmlFor={inputId}>{text.emailLabel}</label>
      <input
        id={inputId}
        name="email"
        type="email"
        dir="ltr"
        autoComplete={webauthn ? "email webauthn" : "email"}
        required
        maxLength={254}
        placeholder="ann@example.com"
        value={email}
        aria-invalid={problem ? "true" : "false"}
        aria-describedby={problem ? `${inputId}-problem` : undefined}
        onChange={(e) => {
          setEmail(e.target.value);
          if (touched) setProblem(emailProblem(e.target.value));
        }}
        onBlur={() => {
          if (email) {
            setTouched(true);
            setProblem(emailProblem(email));
          }
        }}
      />
      {problem && <p id={`${inputId}-problem`} className="field-error">{problemText}</p>}
      <SubmitButton provider={provider} text={text} pendingId={pendingId} isLast={isLast} busyText={text.sendingLink} />
    </form>
  );
}

function CredentialsForm({ provider, page, hidden, pendingId, isLast, start, webauthn }) {
  const details = page.credentials?.[provider.id] ?? { fields: [], demo: false };
  const text = page.text;
  return (
    <form method="post" action={provider.callbackUrl} className="stack" onSubmit={start}>
      {hidden}
      {details.demo && (
        <p className="note">
          <strong>{text.demoTitle}</strong> {fill(text.demoNote, { password: <code key="password">demo</code> })}
        </p>
      )}
      {details.fields.map((f) => (
        <div className="stack" key={f.name}>
          <label htmlFor={`${provider.id}-${f.name}`}>{f.label}</label>
          <input
            id={`${provider.id}-${f.name}`}
            name={f.name}
            type={f.type}
            dir={f.type === "email" ? "ltr" : undefined}
            required
            defaultValue={page.typed?.[`${provider.id}-${f.name}`] ?? (f.type === "email" ? page.email ?? "" : undefined)}
            autoComplete={
              f.type === "email" ? (webauthn ? "username webauthn" : "username") : f.type === "password" ? "current-password" : undefined
            }
          />
        </div>
      ))}
      {/* The demo is a developer's shortcut beside the real ways in: never the primary button. */}
      <SubmitButton provider={provider} text={text} pendingId={pendingId} isLast={isLast} busyText={text.signingIn}
        secondary={details.demo} />
    </form>
  );
}
