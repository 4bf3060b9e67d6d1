"""E-mail address normalisation (docs/email.md, "Address rules"): one table of accepted and
refused inputs."""

from __future__ import annotations

import pytest

from webapp.mail.email_addresses import MAX_LENGTH, InvalidAddress, normalize_email

# Exactly MAX_LENGTH (254) characters: the longest accepted; one more is refused below.
LONGEST = "a" * (MAX_LENGTH - len("@example.com")) + "@example.com"

ACCEPTED = [
    ("ann@example.com", "ann@example.com"),
    ("Ann@Example.COM", "ann@example.com"),
    ("  ann@example.com\t\n", "ann@example.com"),
    ("ann.lee+news@mail.example.co.uk", "ann.lee+news@mail.example.co.uk"),
    ("o'brien@example.ie", "o'brien@example.ie"),
    ("ANN_LEE-99@EXAMPLE.ORG", "ann_lee-99@example.org"),
    # Full-width letters and the full-width @ and dot fold to ASCII under NFKC.
    ("ａｎｎ＠ｅｘａｍｐｌｅ．ｃｏｍ", "ann@example.com"),
    # The "ﬁ" ligature is two letters after NFKC.
    ("ﬁona@example.com", "fiona@example.com"),
    # Unicode local part and domain (internationalised addresses) are kept, lower-cased.
    ("JÖRG@BÜCHER.DE", "jörg@bücher.de"),
    ("用户@例子.广告", "用户@例子.广告"),
    # A decomposed ö (o + combining diaeresis) composes, so both spellings are one address.
    ("jo\u0308rg@example.de", "jörg@example.de"),
    ("a@b.co", "a@b.co"),
    (LONGEST, LONGEST),
]

REFUSED = [
    ("", "empty"),
    ("   ", "empty"),
    ("ann", "no @"),
    ("ann@@example.com", "two @ in a row"),
    ("ann@bob@example.com", "two @"),
    ("@example.com", "empty local part"),
    ("ann@", "empty domain"),
    ("ann@localhost", "domain without a dot"),
    ("ann@example.", "trailing dot"),
    ("ann@.example.com", "leading dot"),
    ("ann@example..com", "empty label"),
    ('"ann"@example.com', "quoted local part"),
    ('"ann lee"@example.com', "quoted local part with a space"),
    ("ann lee@example.com", "space"),
    ("ann@exa mple.com", "space in the domain"),
    ("ann\u00a0lee@example.com", "no-break space"),
    ("ann\u200b@example.com", "zero-width space"),
    ("ann@example.com\r\nBcc: eve@evil.example", "header injection"),
    ("ann@example.com,eve@evil.example", "two addresses"),
    ("ann@example.com;eve@evil.example", "two addresses, semicolon"),
    ("Ann <ann@example.com>", "display name"),
    ("ann(comment)@example.com", "comment"),
    ("ann@[127.0.0.1]", "address literal"),
    ("ann\\@example.com", "backslash"),
    ("ann\x00@example.com", "NUL"),
    ("a" + LONGEST, "255 characters"),
    ("ann＠bob＠example.com", "two full-width @"),
]


@pytest.mark.parametrize(("given", "expected"), ACCEPTED)
def test_accepted_addresses_normalise(given: str, expected: str) -> None:
    assert normalize_email(given) == expected


@pytest.mark.parametrize(("given", "why"), REFUSED)
def test_refused_addresses_raise(given: str, why: str) -> None:
    with pytest.raises(InvalidAddress):
        normalize_email(given)
