"""E-mail address normalisation (docs/email.md): the one form an address is stored and compared in.

The rule is deliberately simpler than RFC 5322: NFKC, trim, lower-case, exactly one ``@``,
a non-empty local part, a domain with a dot and no empty labels, at most 254 characters.
Double quotes, whitespace, control characters and the characters that separate or decorate
addresses in a header (``<>()[],;:\\``) are refused outright: they are legal in exotic
addresses but nobody signs in with those, and refusing them means the value we put in a
``To:`` header can only ever name one mailbox. The apostrophe stays: o'brien@example.com is
a real person's address.
"""

from __future__ import annotations

import unicodedata

MAX_LENGTH = 254
# What could start a comment, a quoted string, a group or a second address in a header.
_SEPARATORS = frozenset('"<>()[],;:\\')
# Unicode categories of spaces, controls, invisible format characters (zero-width space,
# direction marks) and unassigned code points: nothing a person can see or type on purpose.
_INVISIBLE = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"})


class InvalidAddress(ValueError):
    """The value is not an e-mail address we accept; the message says why (for logs)."""


def normalize_email(value: str) -> str:
    """Return the normal form of ``value`` or raise ``InvalidAddress``.

    Two inputs that a person would call the same address (different case, full-width
    characters, surrounding spaces) give the same result.
    """
    address = unicodedata.normalize("NFKC", value).strip().lower()
    if not address:
        raise InvalidAddress("empty")
    if len(address) > MAX_LENGTH:
        raise InvalidAddress(f"longer than {MAX_LENGTH} characters")
    if any(c in _SEPARATORS or unicodedata.category(c) in _INVISIBLE for c in address):
        raise InvalidAddress("contains quotes, spaces, controls or separators")
    if address.count("@") != 1:
        raise InvalidAddress("needs exactly one @")
    local, domain = address.split("@")
    if not local:
        raise InvalidAddress("empty local part")
    if "." not in domain:
        raise InvalidAddress("domain without a dot")
    if any(not label for label in domain.split(".")):
        raise InvalidAddress("domain with an empty label")
    return address


def address_or_none(value: object) -> str | None:
    """Return ``value`` in the normal form, or None when it is no string or no address we
    accept (for a provider's profile, where a missing address is allowed)."""
    if not isinstance(value, str):
        return None
    try:
        return normalize_email(value)
    except InvalidAddress:
        return None
