"""The SAML 2.0 service provider's protocol pieces, without Flask (``type = "saml"``).

``config`` (a provider's table), ``keys`` (our key pair: configured, or made for
development), ``idp_metadata`` (the identity provider's metadata, from a file or a URL),
``assertion`` (what a checked response says: the identity, its attributes; the refusals),
``redirect_binding`` (single logout's messages, their signatures over the query string) and
``service_provider`` (pysaml2: our metadata, the AuthnRequest, the response check, the
logout messages) with ``metadata_signature`` (the IdP metadata's own signature).
Only those two import pysaml2 (the ``saml`` extra), so an installation without it runs
every other kind of provider.
"""
