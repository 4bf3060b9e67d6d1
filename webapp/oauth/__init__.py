"""OAuth 2 and OpenID Connect protocol pieces: configuration, presets, discovery and keys,
client authentication, the state/PKCE/nonce cookies, ID token validation, the client."""
