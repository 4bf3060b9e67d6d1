"""An identity provider's metadata document with no IdP behind it, for tests that need a
configured saml provider and never a good response (the app starts sign-ins, serves its
metadata, and refuses what is posted), or an IdP whose key the test holds."""

from __future__ import annotations

import re
from pathlib import Path

from . import forgery

ENTITY_ID = "https://idp.invalid/metadata"
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


def idp_metadata(entity_id: str, sso_url: str, cert: Path) -> str:
    """The metadata of IdP ``entity_id``: its signing certificate ``cert``, single sign-on
    at ``sso_url`` by HTTP-Redirect."""
    return f"""<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"
    xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="{entity_id}">
  <md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing">
      <ds:KeyInfo><ds:X509Data><ds:X509Certificate>{forgery.pem_body(cert)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo>
    </md:KeyDescriptor>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect"
        Location="{sso_url}"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>
"""


def federation(*documents: str) -> str:
    """One metadata document (an EntitiesDescriptor) of several IdPs' ``documents``."""
    bodies = "".join(_XML_DECLARATION.sub("", document) for document in documents)
    return (
        '<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata">'
        f"{bodies}</md:EntitiesDescriptor>"
    )


def idp_metadata_file(workdir: Path, sso_url: str) -> Path:
    """Write the metadata of ``ENTITY_ID`` (a key made for it, single sign-on at
    ``sso_url``) in ``workdir``; return its path."""
    path = workdir / "idp-metadata.xml"
    path.write_text(idp_metadata(ENTITY_ID, sso_url, forgery.own_key(workdir)[1]))
    return path
