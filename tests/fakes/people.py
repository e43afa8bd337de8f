"""`PersonSessionRepository` in memory: sign-ins and sessions for tests that run the sign-in
flow without a database (`sursis.app.oidc.PeopleSignIn`)."""

from __future__ import annotations

from dataclasses import replace

from sursis.domain.identity.people import PersonSession, SignIn


class FakePersonSessions:
    def __init__(self) -> None:
        self.sign_ins: dict[str, SignIn] = {}
        self.sessions: dict[str, PersonSession] = {}

    async def add_sign_in(self, state_hash: str, sign_in: SignIn, *, keep: int) -> None:
        while len(self.sign_ins) >= keep:
            oldest = min(self.sign_ins, key=lambda k: self.sign_ins[k].expires_at)
            del self.sign_ins[oldest]
        self.sign_ins[state_hash] = sign_in

    async def take_sign_in(self, state_hash: str) -> SignIn | None:
        return self.sign_ins.pop(state_hash, None)

    async def add(self, session_hash: str, session: PersonSession) -> None:
        self.sessions[session_hash] = replace(session, csrf_token="")

    async def get(self, session_hash: str) -> PersonSession | None:
        found = self.sessions.get(session_hash)
        return None if found is None else replace(found)

    async def refreshed(self, session_hash: str, session: PersonSession) -> None:
        self.sessions[session_hash] = replace(session, csrf_token="")

    async def remove(self, session_hash: str) -> None:
        self.sessions.pop(session_hash, None)

    async def remove_expired(self, now: float) -> int:
        expired = [k for k, s in self.sessions.items() if s.expires_at <= now]
        gone = [k for k, s in self.sign_ins.items() if s.expires_at <= now]
        for k in expired:
            del self.sessions[k]
        for k in gone:
            del self.sign_ins[k]
        return len(expired) + len(gone)
