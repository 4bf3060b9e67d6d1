"""Single sign-on chosen by the e-mail domain (docs/how-to/sso-by-domain.md): which provider
an address belongs to (``routing``), the refusals ``enforce_domain`` makes, and the joins of
existing users by their verified address (``joins``)."""
