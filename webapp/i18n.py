"""Pages in the reader's language: Flask-Babel's set-up, which locale a request gets, the
footer's language links, and dates in the locale's words.

The locale is chosen lazily: Flask-Babel calls ``select_locale`` at the first translated
string of a request, so answers that translate nothing (``GET /auth/session``, ``csrf``,
``providers``) never pay for it. The order: the person's choice (the ``auth.locale``
cookie, set by the footer's links to ``GET /language/<code>``), else their browser's
``Accept-Language``, else ``AUTH_DEFAULT_LOCALE``. Only a shipped locale is ever used or
written: anything else in the cookie or the header is ignored, and an unknown code in the
URL is a 404.

An answer whose words were chosen that way says so to caches: ``Vary: Cookie`` (the choice
was read) and, when the browser's languages chose, ``Accept-Language``, merged with any
``Vary`` it has. The selector adds them as it chooses, so an answer that translates nothing
gets neither, and no work.

The catalogues are ``translations/<code>/LC_MESSAGES/messages.po``; ``scripts/translations``
extracts, updates and compiles them (the ``.mo`` files are built, not committed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from datetime import time as dt_time
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, cast

import flask_babel
from babel import Locale
from babel.dates import format_date, format_datetime, format_time, match_skeleton
from babel.support import NullTranslations
from flask import (
    Flask,
    after_this_request,
    current_app,
    g,
    has_app_context,
    has_request_context,
    request,
    url_for,
)
from flask_babel import Babel, get_locale
from jinja2 import Environment
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.utils import pass_context, pass_eval_context
from markupsafe import Markup, escape
from werkzeug.datastructures import LanguageAccept
from werkzeug.http import parse_accept_header
from werkzeug.wrappers import Response

from webapp.browser_state import cookies
from webapp.core.cache_headers import add_vary
from webapp.settings import ConfigError, Settings, current_settings

TRANSLATIONS_DIR = Path(__file__).resolve().parent / "translations"
#: The language the messages are written in: it needs no catalogue.
SOURCE_LOCALE = "en"
LOCALE_COOKIE = "auth.locale"
#: How long the browser keeps the choice: a year, renewed by choosing again.
COOKIE_MAX_AGE = 365 * 24 * 3600
#: Where ``create_app`` keeps the shipped languages (``app.extensions``).
EXTENSION_KEY = "webapp.languages"
#: Where the footer's links are kept once built (``_choice_urls``).
CHOICE_URLS_KEY = "webapp.language_choice_urls"
MAX_SCRIPT_ROOTS = 8
#: Where the request's catalogue is kept (on ``g``: ``_context_catalogue``).
CATALOGUE_VAR = "_catalogue"
#: The template variable a render finds its date formats in (``_render_formats``).
FORMATS_VAR = "_date_formats"
#: How pages write a day: "Nov 24, 2026", "24. Nov. 2026", … (a CLDR skeleton).
DAY_SKELETON = "yMMMd"


class CatalogueError(RuntimeError):
    """A shipped locale's compiled catalogue is missing; the message says how to build it."""


@dataclass(frozen=True)
class Language:
    """A shipped locale as the pages name it."""

    #: As the catalogue's folder is named, e.g. ``de`` or ``pt_BR``.
    code: str
    #: In its own language, e.g. "Deutsch".
    name: str
    #: For ``lang`` attributes (BCP 47), e.g. ``pt-BR``.
    tag: str
    #: ``ltr`` or ``rtl``, for ``dir`` attributes.
    direction: str


def gettext(text: str, **variables: Any) -> str:
    """``text`` in the request's language, ``%(name)s`` filled in from ``variables`` (as
    Flask-Babel's ``gettext``)."""
    translated = str(_context_catalogue().ugettext(text))
    return translated % variables if variables else translated


def ngettext(singular: str, plural: str, num: int, **variables: Any) -> str:
    """The form of ``singular``/``plural`` for ``num`` (``%(num)d``) in the request's language."""
    variables.setdefault("num", num)
    return str(_context_catalogue().ungettext(singular, plural, num)) % variables


def _context_catalogue() -> NullTranslations:
    """The catalogue of the request's language (of the default one outside a request),
    looked up once per application context and kept on ``g``. Flask-Babel looks it up on
    every call, a dozen context-local lookups and the locale's name written out again: the
    account page's ten device names spent more on that than on anything else they do."""
    if not has_app_context():
        return cast(NullTranslations, flask_babel.get_translations())
    found = g.get(CATALOGUE_VAR)
    if found is None:
        found = flask_babel.get_translations()
        setattr(g, CATALOGUE_VAR, found)
    return cast(NullTranslations, found)


def N_(text: str) -> str:
    """Mark ``text`` for the catalogue where it cannot be translated yet (a table built at
    import); the code that shows it passes it through ``gettext`` then."""
    return text


def shipped_locales() -> tuple[str, ...]:
    """The source language and every locale with a catalogue, sorted."""
    found = {p.parent.parent.name for p in TRANSLATIONS_DIR.glob("*/LC_MESSAGES/messages.po")}
    return tuple(sorted(found | {SOURCE_LOCALE}))


#: Each shipped language's name in itself and its script's direction, as Babel's CLDR data
#: gives them (``cldr_language``; a test compares): asking Babel at start-up would load
#: every language's data, about a megabyte each in every worker, for the footer's names
#: alone. A language missing here is asked of Babel.
OWN_NAMES: dict[str, tuple[str, str]] = {
    "ar": ("العربية", "rtl"),
    "de": ("Deutsch", "ltr"),
    "en": ("English", "ltr"),
    "es": ("Español", "ltr"),
    "fr": ("Français", "ltr"),
}


def cldr_language(code: str) -> Language:
    """The language ``code`` as Babel's CLDR data describes it (loads that data)."""
    locale = Locale.parse(code)
    name = locale.get_display_name(locale) or code
    return _described(code, name[:1].upper() + name[1:], locale.text_direction)


def _described(code: str, name: str, direction: str) -> Language:
    return Language(
        code=code,
        name=name,
        tag=code.replace("_", "-"),
        direction="rtl" if direction == "rtl" else "ltr",
    )


def _language(code: str) -> Language:
    known = OWN_NAMES.get(code)
    return cldr_language(code) if known is None else _described(code, *known)


def init_app(app: Flask, conf: Settings) -> None:
    """Check the default locale and the compiled catalogues, set up Flask-Babel (its
    ``_``/``ngettext`` in templates) and add the language route and template helpers."""
    codes = shipped_locales()
    if conf.default_locale not in codes:
        raise ConfigError(
            f"AUTH_DEFAULT_LOCALE must be one of the shipped locales ({', '.join(codes)}); "
            f"got {conf.default_locale!r}"
        )
    for code in codes:
        compiled = TRANSLATIONS_DIR / code / "LC_MESSAGES" / "messages.mo"
        if code != SOURCE_LOCALE and not compiled.is_file():
            raise CatalogueError(
                f"{compiled} is missing: run `scripts/translations compile` (scripts/setup does)"
            )
    app.extensions[EXTENSION_KEY] = tuple(_language(code) for code in codes)
    app.extensions[CHOICE_URLS_KEY] = {}
    Babel(
        app,
        default_locale=conf.default_locale,
        default_translation_directories=str(TRANSLATIONS_DIR),
        locale_selector=select_locale,
    )
    install_template_gettext(app.jinja_env)
    # A page's render gets them bound to the request's catalogue, found once for it.
    app.context_processor(_render_messages)
    app.add_template_global(current_language)
    app.add_template_global(language_links)
    app.add_template_global(language_choices)
    app.context_processor(_render_formats)
    app.add_template_filter(_day_filter, "day")
    app.add_template_filter(_day_element, "day_element")
    app.add_template_filter(_moment_element, "moment_element")


def install_template_gettext(env: Environment) -> None:
    """Give ``env``'s templates (with Jinja's i18n extension) ``_``, ``gettext``,
    ``ngettext``, ``pgettext`` and ``npgettext`` in the request's language."""
    env.newstyle_gettext = True  # type: ignore[attr-defined]
    env.globals.update(TemplateMessages().callables())


def _render_messages() -> dict[str, Callable[..., str]]:
    """The template callables bound to the request's catalogue (a context processor)."""
    return TemplateMessages(_context_catalogue()).callables()


class TemplateMessages:
    """Jinja's "new style" gettext callables (``_('Hi %(name)s', name=…)``, values escaped
    where the template autoescapes) written out, one call each: Jinja's own wrap installed
    callables in two more calls.

    Bound to a catalogue (a page's render) or, without one, finding the request's at each
    call (the e-mails, and macros imported without the page's context). They take Jinja's
    evaluation context (for autoescaping), not the template's: a callable that takes the
    template's context gets a copy of it made for the call in a loop or a block that sets
    variables, which cost the account page more than its messages.
    """

    def __init__(self, catalogue: NullTranslations | None = None) -> None:
        self._catalogue = catalogue

    def callables(self) -> dict[str, Callable[..., str]]:
        return {
            "_": self.gettext,
            "gettext": self.gettext,
            "ngettext": self.ngettext,
            "pgettext": self.pgettext,
            "npgettext": self.npgettext,
        }

    def catalogue(self) -> NullTranslations:
        return self._catalogue if self._catalogue is not None else _context_catalogue()

    @pass_eval_context
    def gettext(self, eval_ctx: EvalContext, text: str, **variables: Any) -> str:
        if not variables:
            return _translated_text(self.catalogue(), text, eval_ctx.autoescape)
        return _filled(eval_ctx, self.catalogue().ugettext(text), variables)

    @pass_eval_context
    def ngettext(
        self, eval_ctx: EvalContext, singular: str, plural: str, num: int, **variables: Any
    ) -> str:
        variables.setdefault("num", num)
        return _filled(eval_ctx, self.catalogue().ungettext(singular, plural, num), variables)

    @pass_eval_context
    def pgettext(self, eval_ctx: EvalContext, msgctxt: str, text: str, **variables: Any) -> str:
        variables.setdefault("context", msgctxt)
        return _filled(eval_ctx, self.catalogue().upgettext(msgctxt, text), variables)

    @pass_eval_context
    def npgettext(
        self,
        eval_ctx: EvalContext,
        msgctxt: str,
        singular: str,
        plural: str,
        num: int,
        **variables: Any,
    ) -> str:
        variables.setdefault("context", msgctxt)
        variables.setdefault("num", num)
        translated = self.catalogue().unpgettext(msgctxt, singular, plural, num)
        return _filled(eval_ctx, translated, variables)


def _filled(eval_ctx: EvalContext, text: str, variables: dict[str, Any]) -> str:
    # As Jinja's new style: the translation is always a format string, and what fills it is
    # escaped when the template autoescapes.
    translated = Markup(text) if eval_ctx.autoescape else text
    return translated % variables


@lru_cache(maxsize=4096)
def _translated_text(catalogue: NullTranslations, text: str, autoescape: bool) -> str:
    """A message without variables, as a page shows it: the same each time for the same
    catalogue (most of a page's messages; the account page shows seventy)."""
    translated = catalogue.ugettext(text)
    return (Markup(translated) if autoescape else translated) % {}


def _languages() -> tuple[Language, ...]:
    languages: tuple[Language, ...] = current_app.extensions[EXTENSION_KEY]
    return languages


def known_codes() -> list[str]:
    """The shipped locales, the default first: a browser that accepts any ("*") gets it."""
    default = current_settings().default_locale
    return [default, *(lang.code for lang in _languages() if lang.code != default)]


def locale_cookie_name() -> str:
    return cookies.cookie_name(LOCALE_COOKIE, host_only=True)


#: How much of ``Accept-Language`` is read: browsers send well under 100 characters, and
#: the parser's cost grows with the header (0.2 s of CPU for 64 KiB).
ACCEPT_LANGUAGE_MAX = 1024


def select_locale() -> str:
    """The request's locale (Flask-Babel's selector): see the module's docstring."""
    codes = known_codes()
    if has_request_context():
        chosen = request.cookies.get(locale_cookie_name())
        if chosen in codes:
            _vary("Cookie")
            return str(chosen)
        _vary("Cookie", "Accept-Language")
        header = request.headers.get("Accept-Language", "")[:ACCEPT_LANGUAGE_MAX]
        accepted = parse_accept_header(header, LanguageAccept).best_match(codes)
        if accepted is not None:
            return accepted
    return current_settings().default_locale


def _vary(*headers: str) -> None:
    """Add ``headers`` to this request's answer's ``Vary`` (merged with what it has)."""

    @after_this_request
    def add(response: Response) -> Response:
        add_vary(response, *headers)
        return response


def _locale() -> Locale:
    # None only outside any application context (a script formatting a date by itself).
    return get_locale() or Locale.parse(SOURCE_LOCALE)


def current_language() -> Language:
    """The language of the page or message being rendered (its ``lang`` and ``dir``)."""
    code = str(_locale())
    found = next((lang for lang in _languages() if lang.code == code), None)
    return _language(code) if found is None else found


def language_links() -> list[tuple[Language, str, bool]]:
    """The footer's links: each language, the URL that picks it, and whether it is the
    page's. None on the answer to a form (a form shown again with what was wrong): its
    address would not show that page again."""
    if request.method not in ("GET", "HEAD"):
        return []
    code = current_language().code
    return [(lang, href, lang.code == code) for lang, href in _choice_urls()]


def language_choices() -> list[tuple[Language, bool]]:
    """Each shipped language and whether it is the page's, for a page that offers the
    choice its own way (the e-mail link's page, the recovery codes shown once)."""
    code = current_language().code
    return [(lang, lang.code == code) for lang in _languages()]


@contextmanager
def speaking(code: str) -> Iterator[None]:
    """Translate what is rendered inside in ``code`` (a shipped locale), whatever the
    request chose: the answer to a language chosen by a form, which cannot go back to its
    page by a redirect."""
    kept = g.pop(CATALOGUE_VAR, None)
    try:
        with flask_babel.force_locale(code):
            yield
    finally:
        g.pop(CATALOGUE_VAR, None)
        if kept is not None:
            setattr(g, CATALOGUE_VAR, kept)


def _choice_urls() -> list[tuple[Language, str]]:
    """Each language and the URL that picks it: the same on every page, so built once per
    application and script root (the footer's five ``url_for`` were a page's costliest
    calls after its messages)."""
    built: dict[str, list[tuple[Language, str]]] = current_app.extensions[CHOICE_URLS_KEY]
    root = request.script_root
    found = built.get(root)
    if found is None:
        found = [(lang, url_for("i18n.choose", code=lang.code)) for lang in _languages()]
        # The root comes from the server or a trusted proxy: one or two. Should a proxy
        # pass on whatever its clients send, what is kept stays bounded all the same.
        if len(built) < MAX_SCRIPT_ROOTS:
            built[root] = found
    return found


def format_day(moment: datetime) -> str:
    """A day (UTC) in the request's language: "Nov 24, 2026", "24. Nov. 2026", …"""
    return _day(_formats(_locale()), moment)


def format_moment(moment: datetime) -> str:
    """A day and a time of day in UTC, without seconds: "Nov 24, 2026, 10:40 PM UTC"."""
    return _moment(_formats(_locale()), moment)


@pass_context
def _day_filter(context: Context, moment: datetime) -> str:
    """``| day``: ``format_day`` in the page's language."""
    return _day(_page_formats(context), moment)


@pass_context
def _day_element(context: Context, moment: datetime) -> Markup:
    """``| day_element``: the day as pages show it, in ``<time datetime="…">``."""
    return _time_element(moment, _day(_page_formats(context), moment))


@pass_context
def _moment_element(context: Context, moment: datetime) -> Markup:
    """``| moment_element``: the moment as pages show it, in ``<time datetime="…">``."""
    return _time_element(moment, _moment(_page_formats(context), moment))


def _time_element(moment: datetime, text: str) -> Markup:
    # Both parts escaped, then joined in an f-string: half the time of Markup's ``%``,
    # which pages listing forty moments noticed.
    return Markup(f'<time datetime="{escape(moment.isoformat())}">{escape(text)}</time>')


@dataclass(frozen=True, eq=False)
class _Formats:
    """A locale's ways of writing a day and a moment, made once per locale (``_formats``).
    Compared by identity: the caches of formatted texts are keyed on it."""

    locale: Locale
    #: The day's pattern (``DAY_SKELETON``) and the short time of day's.
    day: str
    time: str
    #: How the locale's medium date-time format joins them: "{1}, {0}", "{1} um {0}", …
    joined: str


@cache
def _formats(locale: Locale) -> _Formats:
    """The locale's patterns, found once. The day and the time of day are formatted apart
    and joined as the medium date-time format joins them: pages list many moments, and the
    texts of a day or of a minute repeat (``_day_text``, ``_time_text``)."""
    skeletons = locale.datetime_skeletons
    day = skeletons[match_skeleton(DAY_SKELETON, skeletons) or DAY_SKELETON].pattern
    time = locale.time_formats["short"].pattern
    # The joining pattern has no field of its own, only "{1}", "{0}" and quoted literals
    # (" 'at' "), which formatting it unquotes.
    joined = format_datetime(
        datetime(2000, 1, 1), str(locale.datetime_formats["medium"]), locale=locale
    )
    return _Formats(locale, day, time, joined)


def _render_formats() -> dict[str, _Formats]:
    """The request's formats, looked up once per render (a context processor)."""
    return {FORMATS_VAR: _formats(_locale())}


def _page_formats(context: Context) -> _Formats:
    # As for the catalogue: a macro imported without context finds none in its variables.
    found = context.get(FORMATS_VAR)
    return found if isinstance(found, _Formats) else _formats(_locale())


def _as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive one is taken to be UTC already (as Babel takes it)."""
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment


def _day(formats: _Formats, moment: datetime) -> str:
    return _day_text(formats, _as_utc(moment).date())


def _moment(formats: _Formats, moment: datetime) -> str:
    utc = _as_utc(moment)
    day = _day_text(formats, utc.date())
    time = _time_text(formats, utc.hour, utc.minute)
    return formats.joined.replace("{1}", day).replace("{0}", time) + " UTC"


@lru_cache(maxsize=4096)
def _day_text(formats: _Formats, day: date) -> str:
    return format_date(day, formats.day, locale=formats.locale)


@lru_cache(maxsize=4096)
def _time_text(formats: _Formats, hour: int, minute: int) -> str:
    return format_time(dt_time(hour, minute), formats.time, locale=formats.locale)
