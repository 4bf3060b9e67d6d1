"""The ways to sign in, one use case each: ``email`` (links and codes), ``oauth``
(authorization request and callback), ``credentials``, ``passkey``, ``device`` (a code
approved on another device), ``second_factor`` (a pending sign-in passed with a code or a
passkey); ``identity`` (which user a provider identity signs in: the linking rules) and
``finish`` (the sign-in hook, the second-factor gate, the new session), which every way in
ends with."""
