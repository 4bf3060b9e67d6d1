"""Translated pages (issue 16, part 3): complete catalogues, which locale a request gets,
the language links, the start-up checks, dates, messages and e-mails in the reader's
language, and no cost for the JSON endpoints that translate nothing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from babel.messages.pofile import read_po
from flask import render_template_string

from webapp import create_app
from webapp.i18n import (
    OWN_NAMES,
    SOURCE_LOCALE,
    TRANSLATIONS_DIR,
    CatalogueError,
    cldr_language,
    format_day,
    format_moment,
    shipped_locales,
)
from webapp.settings import ConfigError
from webapp.storage.db import db
from webapp.storage.models import User

from .support.config import base_config
from .support.mail import html_of, link_of, text_of
from .support.oauth import write_providers_toml

ROOT = Path(__file__).resolve().parent.parent
POT = TRANSLATIONS_DIR / "messages.pot"
TRANSLATED = [code for code in shipped_locales() if code != SOURCE_LOCALE]
HTML_LANG = re.compile(r'<html lang="([^"]+)" dir="(ltr|rtl)">')


def _key(message: Any) -> tuple[str | None, Any]:
    """A message as the catalogue tells it from others: its context (``pgettext``) and id."""
    return message.context, message.id if isinstance(message.id, str) else tuple(message.id)


def _ids(path: Path) -> set[Any]:
    with path.open("rb") as fh:
        return {_key(m) for m in read_po(fh) if m.id}


def _lang(response: Any) -> tuple[str, str]:
    found = HTML_LANG.search(response.get_data(as_text=True))
    assert found, response.get_data(as_text=True)[:300]
    return found[1], found[2]


# -- the catalogues ---------------------------------------------------------------------


def test_the_issue_s_languages_are_shipped():
    assert {"en", "de", "fr", "es", "ar"} <= set(shipped_locales())


def test_the_template_catalogue_is_up_to_date_with_the_sources(tmp_path):
    fresh = tmp_path / "messages.pot"
    subprocess.run([str(ROOT / "scripts" / "translations"), "extract", str(fresh)], check=True)
    extracted, committed = _ids(fresh), _ids(POT)
    assert extracted, "nothing was extracted"
    assert extracted - committed == set(), "new messages: run scripts/translations update"
    assert committed - extracted == set(), "gone messages: run scripts/translations update"


@pytest.mark.parametrize("code", TRANSLATED)
def test_every_message_is_translated_in_every_shipped_locale(code):
    with (TRANSLATIONS_DIR / code / "LC_MESSAGES" / "messages.po").open("rb") as fh:
        catalogue = read_po(fh, locale=code)
    messages = {_key(m): m for m in catalogue if m.id}
    missing = _ids(POT) - set(messages)
    assert not missing, f"{code}: not in the catalogue: {sorted(map(str, missing))[:5]}"
    untranslated, fuzzy = [], []
    for key, message in messages.items():
        forms = message.string if isinstance(message.string, tuple) else (message.string,)
        if len(forms) != (catalogue.num_plurals if isinstance(key[1], tuple) else 1) or not all(
            f.strip() for f in forms
        ):
            untranslated.append(key)
        if message.fuzzy:
            fuzzy.append(key)
    assert untranslated == [], f"{code}: untranslated: {untranslated[:5]}"
    assert fuzzy == [], f"{code}: fuzzy: {fuzzy[:5]}"
    assert not catalogue.fuzzy, f"{code}: the catalogue itself is marked fuzzy"
    # Placeholders as in the source (%(name)s), plural forms as the language has them.
    problems = [(m.id, str(e)) for m, errors in catalogue.check() for e in errors]
    assert problems == [], f"{code}: {problems[:5]}"


@pytest.mark.parametrize("code", [SOURCE_LOCALE, *TRANSLATED])
def test_no_message_spells_e_mail_email(code):
    # "e-mail" ("E-mail" first in a sentence or label; German "E-Mail", …), never "Email".
    path = POT if code == SOURCE_LOCALE else TRANSLATIONS_DIR / code / "LC_MESSAGES" / "messages.po"
    with path.open("rb") as fh:
        messages = [m for m in read_po(fh) if m.id]
    texts = [m.id if code == SOURCE_LOCALE else m.string for m in messages]
    forms = [form for text in texts for form in (text if isinstance(text, tuple) else (text,))]
    # Not the placeholders: %(email)s is a name, not a word the reader sees.
    spelled = [f for f in forms if re.search(r"\bemail\b", re.sub(r"%\(\w+\)", "", f), re.I)]
    assert spelled == [], f"{code}: {spelled[:5]}"


# -- which locale a request gets ---------------------------------------------------------


def test_without_a_preference_pages_are_in_the_default_language(client):
    assert _lang(client.get("/auth/signin")) == ("en", "ltr")


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("de-DE,de;q=0.9,en;q=0.5", ("de", "ltr")),
        ("ar-EG", ("ar", "rtl")),
        ("pt-BR, es;q=0.8, fr;q=0.5", ("es", "ltr")),
        ("fr;q=0, de;q=0.3", ("de", "ltr")),
        ("xx-YY, *;q=0.1", ("en", "ltr")),
        ("tlh", ("en", "ltr")),
    ],
)
def test_the_browser_s_languages_choose_among_the_shipped_ones(client, accept, expected):
    assert _lang(client.get("/auth/signin", headers={"Accept-Language": accept})) == expected


def test_the_chosen_language_beats_the_browser_s(client):
    client.set_cookie("auth.locale", "de")
    page = client.get("/auth/signin", headers={"Accept-Language": "fr"})
    assert _lang(page) == ("de", "ltr")
    assert "Bei Webapp anmelden" in page.get_data(as_text=True)


@pytest.mark.parametrize("cookie", ["xx", "de-DE", "<script>", "../../etc", "AR", ""])
def test_an_unknown_language_in_the_cookie_is_ignored_and_never_printed(client, cookie):
    client.set_cookie("auth.locale", cookie)
    page = client.get("/", headers={"Accept-Language": "fr"})
    assert _lang(page) == ("fr", "ltr")
    if cookie:
        assert cookie not in page.get_data(as_text=True)


def test_auth_default_locale_is_the_fallback(make_app):
    app = make_app(AUTH_DEFAULT_LOCALE="fr")
    client = app.test_client()
    assert _lang(client.get("/")) == ("fr", "ltr")
    assert _lang(client.get("/", headers={"Accept-Language": "*"})) == ("fr", "ltr")
    assert _lang(client.get("/", headers={"Accept-Language": "es"})) == ("es", "ltr")


# -- the footer's language links ---------------------------------------------------------


@pytest.mark.parametrize("code", shipped_locales())
def test_each_shipped_language_s_own_name_is_kept_as_cldr_gives_it(code):
    """The names are kept in the code so that a worker loads no language's data for them;
    they must be what Babel's CLDR data says (a new language needs its line)."""
    cldr = cldr_language(code)
    assert OWN_NAMES[code] == (cldr.name, cldr.direction)


def test_every_page_links_to_each_language_named_in_itself(client):
    html = client.get("/auth/signin").get_data(as_text=True)
    footer = html[html.index('<nav aria-label="Language">') :]
    links = dict(re.findall(r'<a href="/language/(\w+)" lang="[\w-]+"[^>]*>([^<]+)</a>', footer))
    assert links == {
        "ar": "العربية",
        "de": "Deutsch",
        "en": "English",
        "es": "Español",
        "fr": "Français",
    }
    assert 'hreflang="ar" dir="rtl"' in footer
    assert re.search(r'lang="en" hreflang="en" dir="ltr" aria-current="true"', footer)


def test_the_language_links_follow_the_script_root_they_are_served_under(client):
    """The links are built once per script root (``i18n._choice_urls``): an app mounted
    under a prefix links under it, and the same app at the root does not."""

    def links(root: str) -> list[str]:
        html = client.get("/auth/signin", base_url=f"http://localhost{root}").get_data(as_text=True)
        footer = html[html.index('<nav aria-label="Language">') :]
        return re.findall(r'<a href="([^"]+)" lang=', footer)

    for _ in range(2):  # built, then as kept
        assert links("/app") == [f"/app/language/{c}" for c in ("ar", "de", "en", "es", "fr")]
        assert links("") == [f"/language/{c}" for c in ("ar", "de", "en", "es", "fr")]


def test_choosing_a_language_keeps_it_and_goes_back_to_the_page(client):
    back = "http://localhost/auth/signin?callbackUrl=%2Faccount&error=SessionRequired"
    answer = client.get("/language/ar", headers={"Referer": back})
    assert answer.status_code == 303
    assert answer.headers["Location"] == back
    assert answer.headers["Cache-Control"] == "no-store"
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith("auth.locale=ar;")
    for attribute in ("HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=31536000"):
        assert attribute in cookie, cookie
    assert "Secure" not in cookie  # http://localhost: no https, no prefix
    page = client.get("/auth/signin?callbackUrl=/account&error=SessionRequired")
    assert _lang(page) == ("ar", "rtl")
    assert "يُرجى تسجيل الدخول" in page.get_data(as_text=True)


@pytest.mark.parametrize(
    "referer",
    [None, "https://evil.example/phish", "//evil.example/", "http://localhost\\@evil.example/"],
)
def test_the_way_back_stays_on_the_site(client, referer):
    headers = {"Referer": referer} if referer else {}
    answer = client.get("/language/de", headers=headers)
    assert answer.status_code == 303
    assert answer.headers["Location"] == "http://localhost/"


@pytest.mark.parametrize("code", ["xx", "DE", "de-DE", "en_US", "..", "%3Cb%3E"])
def test_an_unknown_language_is_not_found_and_sets_nothing(client, code):
    answer = client.get(f"/language/{code}", headers={"Accept-Language": "de"})
    assert answer.status_code == 404
    assert "Set-Cookie" not in answer.headers
    assert "Seite nicht gefunden" in answer.get_data(as_text=True)


def test_on_https_the_cookie_is_secure_and_host_prefixed(make_app):
    client = make_app(AUTH_URL="https://example.com/auth").test_client()
    answer = client.get("/language/es", base_url="https://example.com")
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith("__Host-auth.locale=es;") and "Secure" in cookie
    client.set_cookie("__Host-auth.locale", "es", domain="example.com")
    assert _lang(client.get("/", base_url="https://example.com")) == ("es", "ltr")


def test_a_page_whose_address_carries_a_secret_links_each_language_to_itself(email_app, mailbox):
    # The e-mail link's confirmation page sends no Referer, so /language/<code> could not
    # lead back: its links are its own address with ``lang``, which keeps the choice and
    # shows the page again (the secret goes nowhere it was not already).
    client = email_app().test_client()
    csrf = client.get("/auth/csrf").json["csrfToken"]
    client.post("/auth/signin/email", data={"csrfToken": csrf, "email": "ann@example.com"})
    link = urlsplit(link_of(mailbox.last()))
    html = client.get(f"{link.path}?{link.query}").get_data(as_text=True)
    assert 'id="email-confirm-form"' in html
    assert "/language/" not in html
    hrefs = dict(re.findall(r'<a href="([^"]+)" lang="([\w-]+)" hreflang', html))
    german = next(href for href, lang in hrefs.items() if lang == "de").replace("&amp;", "&")
    assert german.startswith(f"http://localhost{link.path}?") and "lang=de" in german
    chosen = client.get(german)
    assert chosen.status_code == 302
    assert chosen.headers["Location"] == f"http://localhost{link.path}?{link.query}"
    assert any(c.startswith("auth.locale=de;") for c in chosen.headers.getlist("Set-Cookie"))
    assert _lang(client.get(chosen.headers["Location"])) == ("de", "ltr")
    # Choosing signed nobody in, and spent nothing: the page's button still works.
    assert client.get_cookie("auth.session-token") is None
    assert 'id="email-confirm-form"' in client.get(chosen.headers["Location"]).get_data(
        as_text=True
    )


def test_a_form_shown_again_has_no_language_links(client, auth):
    auth.signin()
    setup = client.get("/account/two-factor")
    assert "/language/" in setup.get_data(as_text=True)
    again = client.post("/account/two-factor", data={"csrfToken": auth.csrf(), "code": "000000"})
    assert again.status_code == 400
    assert "/language/" not in again.get_data(as_text=True)


# -- start-up ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["xx", "de-DE", "english"])
def test_an_unshipped_default_locale_stops_start_up_naming_the_choices(database_url, value):
    with pytest.raises(ConfigError) as raised:
        create_app(base_config(database_url, AUTH_DEFAULT_LOCALE=value), environ={})
    message = str(raised.value)
    assert "AUTH_DEFAULT_LOCALE" in message and repr(value) in message
    assert "ar, de, en, es, fr" in message


def test_the_default_locale_can_come_from_the_toml_file(database_url, tmp_path):
    config = tmp_path / "auth.toml"
    config.write_text('[auth]\ndefault_locale = "de"\n')
    app = create_app(base_config(database_url, AUTH_CONFIG=str(config)), environ={})
    assert _lang(app.test_client().get("/")) == ("de", "ltr")


def test_a_missing_compiled_catalogue_stops_start_up_with_the_fix(
    database_url, tmp_path, monkeypatch
):
    copy = tmp_path / "translations"
    shutil.copytree(TRANSLATIONS_DIR, copy)
    (copy / "de" / "LC_MESSAGES" / "messages.mo").unlink()
    monkeypatch.setattr("webapp.i18n.TRANSLATIONS_DIR", copy)
    with pytest.raises(CatalogueError, match=r"de/LC_MESSAGES/messages\.mo is missing.*compile"):
        create_app(base_config(database_url), environ={})


# -- no cost where nothing is translated ---------------------------------------------------


def test_the_hot_json_endpoints_never_choose_a_locale(app, client, auth):
    babel = app.extensions["babel"]
    chosen: list[str] = []
    select = babel.locale_selector

    def counting() -> str:
        chosen.append(select())
        return chosen[-1]

    babel.locale_selector = counting
    client.set_cookie("auth.locale", "ar")
    headers = {"Accept-Language": "de"}
    for signed_in in (False, True):
        if signed_in:
            auth.signin()
        for path in ("/auth/session", "/auth/csrf", "/auth/providers"):
            assert client.get(path, headers=headers).status_code == 200
    assert chosen == []
    # The spy works: a page chooses once, however many strings it translates.
    client.get("/auth/signin", headers=headers)
    assert chosen == ["ar"]


def _vary(response: Any) -> list[str]:
    """The ``Vary`` header's names, as many times as they are given."""
    return [name.strip() for name in response.headers.get("Vary", "").split(",") if name.strip()]


def test_an_answer_in_the_browser_s_language_varies_by_it_and_by_the_cookie(client, auth):
    page = client.get("/auth/signin", headers={"Accept-Language": "de"})
    assert _lang(page) == ("de", "ltr")
    assert sorted(_vary(page)) == ["Accept-Language", "Cookie"]  # each once, merged
    # Without Accept-Language the default was chosen in its place: the same.
    assert sorted(_vary(client.get("/"))) == ["Accept-Language", "Cookie"]
    # Translated error JSON: the account API's message.
    auth.signin()
    refused = client.post(
        "/account/api/delete",
        json={"confirm": "nope"},
        headers={"X-CSRFToken": auth.csrf(), "Accept-Language": "es"},
    )
    assert refused.json["message"] == "Escriba DELETE para confirmar."
    assert sorted(_vary(refused)) == ["Accept-Language", "Cookie"]


def test_an_answer_in_the_chosen_language_varies_by_the_cookie_alone(client):
    client.set_cookie("auth.locale", "fr")
    # The home page reads no other cookie: its Vary is the language's alone.
    page = client.get("/", headers={"Accept-Language": "de"})
    assert _lang(page) == ("fr", "ltr")
    assert _vary(page) == ["Cookie"]


def test_answers_that_choose_no_language_do_not_vary_by_it(client, auth):
    headers = {"Accept-Language": "de"}
    for signed_in in (False, True):
        if signed_in:
            auth.signin()
        for path in ("/auth/session", "/auth/csrf", "/auth/providers"):
            answer = client.get(path, headers=headers)
            assert answer.status_code == 200
            assert "Accept-Language" not in _vary(answer), (path, answer.headers)
    # Choosing a language answers with a redirect that holds no words.
    chosen = client.get("/language/de", headers=headers)
    assert chosen.status_code == 303 and "Accept-Language" not in _vary(chosen)


# -- dates, messages and e-mails in the reader's language ----------------------------------


@pytest.mark.parametrize(
    ("accept", "day", "moment"),
    [
        ("en", "Nov 24, 2026", "Nov 24, 2026, 10:40 PM UTC"),
        ("de", "24. Nov. 2026", "24. Nov. 2026, 22:40 UTC"),
        ("fr", "24 nov. 2026", "24 nov. 2026, 22:40 UTC"),
        ("ar", "24 نوفمبر 2026", "24 نوفمبر 2026، 10:40 م UTC"),
    ],
)
def test_dates_are_written_the_locale_s_way(app, accept, day, moment):
    when = datetime(2026, 11, 24, 22, 40, 5, tzinfo=UTC)
    with app.test_request_context("/", headers={"Accept-Language": accept}):
        assert format_day(when).replace("\u202f", " ") == day
        assert format_moment(when).replace("\u202f", " ") == moment


def test_page_templates_translate_and_escape_what_fills_a_message(app):
    """The templates' ``_``, ``ngettext``, ``pgettext`` and ``npgettext`` (Jinja's "new
    style"): the page's language, the plural form for the number, the message's context,
    and the values that fill a message escaped on an escaped page, as they are elsewhere."""
    source = (
        "{{ _('Signed out by %(provider)s', provider=who) }}|"
        "{{ ngettext('%(num)d hour', '%(num)d hours', 3) }}|"
        "{{ ngettext('Signed out %(num)d other session', "
        "'Signed out %(num)d other sessions', 1) }}|"
        "{{ pgettext('activity', 'Signed in') }}|"
        "{{ npgettext('activity', '%(num)d try by %(who)s', '%(num)d tries by %(who)s', 2, "
        "who=who) }}|{{ _('100%% sure') }}"
    )
    with app.test_request_context("/", headers={"Accept-Language": "de"}):
        escaped = render_template_string(source, who="<b>Corp</b>")
        plain = app.jinja_env.overlay(autoescape=False).from_string(source).render(who="<b>")
    assert escaped.split("|") == [
        "Von &lt;b&gt;Corp&lt;/b&gt; abgemeldet",
        "3 Stunden",
        "1 andere Sitzung abgemeldet",
        "Angemeldet",
        "2 tries by &lt;b&gt;Corp&lt;/b&gt;",
        "100% sure",
    ]
    assert plain.split("|")[0] == "Von <b> abgemeldet"


CHROME_ON_LINUX = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36"
)


def test_the_account_page_in_german_with_its_dates_and_messages(
    app, client, auth, user_factory, session_factory
):
    auth.signin()
    with app.app_context():
        user_id = db.session.execute(db.select(User.id)).scalar_one()
    other = session_factory(app, user_id, user_agent=CHROME_ON_LINUX)
    headers = {"Accept-Language": "de"}
    page = client.get("/account", headers=headers)
    html = page.get_data(as_text=True)
    assert _lang(page) == ("de", "ltr")
    assert "Wo Sie angemeldet sind" in html and "Chrome 120 unter Linux" in html
    with app.test_request_context("/", headers=headers):
        today = format_day(datetime.now(UTC))
    assert "Mitglied seit <time" in html and f">{today}</time>" in html
    # An action's message, flashed after a plain form post, in the same language.
    answer = client.post(
        f"/account/sessions/{other.id}/end", data={"csrfToken": auth.csrf()}, headers=headers
    )
    assert answer.status_code == 303
    after = client.get("/account", headers=headers).get_data(as_text=True)
    assert "Diese Sitzung wurde abgemeldet." in after


def test_account_refusals_in_json_keep_their_code_and_translate_the_message(client, auth):
    auth.signin()
    answer = client.post(
        "/account/api/delete",
        json={"confirm": "nope"},
        headers={"X-CSRFToken": auth.csrf(), "Accept-Language": "es"},
    )
    assert answer.status_code == 400
    assert answer.json["error"] == "ConfirmationRequired"
    assert answer.json["message"] == "Escriba DELETE para confirmar."


@pytest.mark.parametrize(
    ("accept", "subject", "sentence", "direction"),
    [
        ("de", "Bei Webapp anmelden", "Oder geben Sie in dem Browser", "ltr"),
        ("ar", "تسجيل الدخول إلى Webapp", "يعمل الرابط والرمز مرة واحدة", "rtl"),
    ],
)
def test_the_sign_in_message_is_in_the_language_of_the_request(
    email_app, mailbox, accept, subject, sentence, direction
):
    client = email_app().test_client()
    csrf = client.get("/auth/csrf").json["csrfToken"]
    client.post(
        "/auth/signin/email",
        data={"csrfToken": csrf, "email": "ann@example.com"},
        headers={"Accept-Language": accept},
    )
    message = mailbox.last()
    assert message["Subject"] == subject
    assert sentence in text_of(message)
    html = html_of(message)
    assert f'<html lang="{accept}" dir="{direction}">' in html
    assert sentence in html
    # The code and the link are the same in every language.
    assert re.search(r"\b[A-Z0-9]{4}-[A-Z0-9]{4}\b", text_of(message))


def test_a_configured_subject_is_kept_as_written(email_app, mailbox):
    client = email_app(EMAIL_SUBJECT="Your {{ site }} link").test_client()
    csrf = client.get("/auth/csrf").json["csrfToken"]
    client.post(
        "/auth/signin/email",
        data={"csrfToken": csrf, "email": "ann@example.com"},
        headers={"Accept-Language": "fr"},
    )
    message = mailbox.last()
    assert message["Subject"] == "Your Webapp link"
    assert "Ou, dans le navigateur où vous avez fait la demande" in text_of(message)


# -- the islands' words --------------------------------------------------------------------


def _page_data(html: str, element_id: str) -> dict[str, Any]:
    found = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html)
    assert found, element_id
    data: dict[str, Any] = json.loads(found[1])
    return data


def _keys_read(source: str, variable: str) -> set[str]:
    """The properties ``source`` reads from ``variable`` (``text.signInWith``), not imports."""
    return set(re.findall(rf"(?<![\w./]){re.escape(variable)}\.(\w+)", source))


def test_the_islands_get_every_word_they_read_from_the_page(client):
    chooser = _page_data(
        client.get("/auth/signin", headers={"Accept-Language": "es"}).get_data(as_text=True),
        "chooser-data",
    )["text"]
    jsx = (ROOT / "ui-src" / "chooser" / "Chooser.jsx").read_text()
    assert _keys_read(jsx, "text") <= set(chooser)
    assert chooser["signInWith"] == "Iniciar sesión con {name}"
    assert chooser["providerCount"] == "0 proveedores"
    ceremony = (ROOT / "ui-src" / "passkey" / "ceremony.js").read_text()
    main = (ROOT / "ui-src" / "passkey" / "main.js").read_text()
    assert _keys_read(ceremony, "text") | _keys_read(main, "data.text") <= set(chooser["passkey"])

    error = _page_data(
        client.get("/auth/error?error=Verification", headers={"Accept-Language": "fr"}).get_data(
            as_text=True
        ),
        "error-page-data",
    )
    island = (ROOT / "ui-src" / "error-page" / "ErrorPage.jsx").read_text()
    assert _keys_read(island, "text") <= set(error["text"])
    assert error["title"] == "Ce lien de connexion ne fonctionne plus"
    assert error["text"]["referenceAndCode"] == "Référence : {reference} · code {code}"
    assert error["code"] == "Verification"  # codes are never translated


# -- the names of the providers the app builds in ------------------------------------------

BUILT_IN_NAMES = {
    "en": {"email": "E-mail", "demo": "Demo account (development only)", "passkey": "Passkey"},
    "de": {"email": "E-Mail", "demo": "Demokonto (nur Entwicklung)", "passkey": "Passkey"},
    "fr": {
        "email": "E-mail",
        "demo": "Compte de démonstration (développement uniquement)",
        "passkey": "Clé d’accès",
    },
}


def test_built_in_provider_names_are_translated_for_each_request(client, auth):
    # The providers are built once, at start-up; each request names them in its language.
    for accept, names in (*BUILT_IN_NAMES.items(), ("de", BUILT_IN_NAMES["de"])):
        html = client.get("/auth/signin", headers={"Accept-Language": accept}).get_data(
            as_text=True
        )
        assert _page_data(html, "chooser-data")["names"] == names
    # The server's own chooser (without JavaScript), the ways in (the page and the account
    # API), the error page's island.
    assert ">Mit E-Mail anmelden</button>" in html
    assert ">Mit Demokonto (nur Entwicklung) anmelden</button>" in html
    auth.signin()
    german = {"Accept-Language": "de"}
    account = client.get("/account", headers=german).get_data(as_text=True)
    assert "<strong>Demokonto (nur Entwicklung)</strong>" in account
    [method] = client.get("/account/api", headers=german).json["accounts"]
    assert method["providerName"] == "Demokonto (nur Entwicklung)"
    error = client.get("/auth/error?error=AccessDenied", headers=german).get_data(as_text=True)
    assert _page_data(error, "error-page-data")["lastUsed"] == "Demokonto (nur Entwicklung)"


def test_the_providers_json_names_them_in_english_whatever_the_language(client):
    # For Auth.js clients, whose pages show it: one answer for every request, which
    # chooses no language (test_the_hot_json_endpoints_never_choose_a_locale).
    client.get("/auth/signin", headers={"Accept-Language": "de"})
    for accept in ("de", "ar", "en"):
        listed = client.get("/auth/providers", headers={"Accept-Language": accept}).json
        assert {pid: p["name"] for pid, p in listed.items()} == BUILT_IN_NAMES["en"]


def test_a_name_the_configuration_gives_is_shown_as_given_in_every_language(email_app, tmp_path):
    config = write_providers_toml(
        tmp_path / "auth.toml", [{"id": "email", "type": "email", "name": "E-mail"}]
    )
    client = email_app(AUTH_CONFIG=str(config)).test_client()
    html = client.get("/auth/signin", headers={"Accept-Language": "de"}).get_data(as_text=True)
    assert ">Mit E-mail anmelden</button>" in html
    assert _page_data(html, "chooser-data")["names"]["email"] == "E-mail"
    assert client.get("/auth/providers").json["email"]["name"] == "E-mail"
