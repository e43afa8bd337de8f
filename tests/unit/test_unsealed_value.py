"""An encrypted database's cipher refuses what is not sealed, naming where it is; the error maps to
409 `unsealed_value`; values that are sealed, or absent, open as before."""

from __future__ import annotations

import base64
import os
import uuid

import pytest

from sursis.app.problems import status_for
from sursis.domain.encryption import Address, EncryptedValueUnreadable, UnsealedValue
from sursis.infra.db.sealing import AUTHORIZATIONS, MESSAGES, PENDING_CALLS
from sursis.infra.encryption import AesGcmCipher, LocalKeyring


def strict() -> AesGcmCipher:
    keys = LocalKeyring.parse(f"k1:{base64.b64encode(os.urandom(32)).decode()}")
    return AesGcmCipher(keys, refuses_plaintext=True)


def test_an_unsealed_value_is_refused_by_its_address_and_maps_to_409() -> None:
    cipher, cid = strict(), uuid.uuid4()
    row = {"conversation_id": cid, "seq": 3}
    with pytest.raises(UnsealedValue) as raised:
        MESSAGES.open_value(cipher, "body", '{"kind": "request"}', row)
    error = raised.value
    assert isinstance(error, EncryptedValueUnreadable)  # every reader that refuses one refuses it
    assert (error.code, status_for(error)) == ("unsealed_value", 409)
    assert f"messages.body row ({cid}, 3)" in error.message
    assert error.extra == {"table": "messages", "column": "body"}
    assert error.finding("default", cid).details == {
        "table": "messages",
        "column": "body",
        "row": [str(cid), "3"],
    }
    assert "request" not in error.message


@pytest.mark.parametrize("stored", [{"event_id": "evt_1"}, "evt_1", "sursis:plain:evt_1", ["a"]])
def test_json_and_escaped_plaintext_are_refused_too(stored: object) -> None:
    with pytest.raises(UnsealedValue):
        PENDING_CALLS.open_value(strict(), "args", stored, {"correlation_id": uuid.uuid4()})


def test_sealed_and_absent_values_open_and_the_unchecked_reader_takes_plaintext() -> None:
    cipher, row = strict(), {"id": uuid.uuid4()}
    sealed = AUTHORIZATIONS.seal_value(cipher, "args_match", {"event_id": "evt_1"}, row)
    assert AUTHORIZATIONS.open_value(cipher, "args_match", sealed, row) == {"event_id": "evt_1"}
    assert AUTHORIZATIONS.open_value(cipher, "args_match", None, row) is None
    assert AUTHORIZATIONS.open_unchecked(cipher, "reason", "sursis:plain:x", row) == "x"


def test_a_copied_value_is_refused_naming_the_row_it_was_found_in() -> None:
    cipher = strict()
    stored = cipher.seal("hello", Address("runs", "input", ("r1",)))
    with pytest.raises(EncryptedValueUnreadable) as raised:
        cipher.open(stored, Address("runs", "output", ("r1",)))
    assert "runs.output row (r1)" in raised.value.message
