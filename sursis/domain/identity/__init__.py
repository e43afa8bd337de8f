"""Who is calling: API keys (made once, shown once, stored as a hash, resolved to a `Principal`), the
verified-key cache, and the people who sign in with the identity provider (group-to-role rules,
sign-ins, sessions).

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.identity.<module>`). See README.md."""

from sursis.domain.identity import (
    credential_cache,
    keys,
    people,
)

__all__ = [
    "credential_cache",
    "keys",
    "people",
]
