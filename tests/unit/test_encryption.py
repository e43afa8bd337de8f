"""The AES-256-GCM cipher and the local keyring: formats, associated data, key ids, errors."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from sursis.app.problems import status_for
from sursis.app.settings import Settings
from sursis.domain.encryption import (
    Address,
    EncryptedValueUnreadable,
    EncryptionKeyUnavailable,
    KeyringInvalid,
)
from sursis.infra.db.sealing import PENDING_CALLS
from sursis.infra.encryption import PLAINTEXT, AesGcmCipher, FileKeyring, LocalKeyring, load_keyring

HERE = Address("messages", "body", ("c1", 1))


def key(key_id: str) -> str:
    return f"{key_id}:{base64.b64encode(os.urandom(32)).decode()}"


def cipher(text: str) -> AesGcmCipher:
    return AesGcmCipher(LocalKeyring.parse(text))


def test_a_sealed_value_names_its_key_and_opens_only_at_its_address() -> None:
    sealing = cipher(key("k1"))
    stored = sealing.seal("the user's words", HERE)
    assert stored.startswith("sursis:enc:1:k1:")
    assert "user" not in stored
    assert sealing.key_id_of(stored) == "k1"
    assert sealing.open(stored, HERE) == "the user's words"
    assert sealing.seal("the user's words", HERE) != stored  # a fresh nonce each time
    for elsewhere in (
        Address("messages", "body", ("c1", 2)),
        Address("messages", "other", ("c1", 1)),
        Address("runs", "body", ("c1", 1)),
    ):
        with pytest.raises(EncryptedValueUnreadable) as raised:
            sealing.open(stored, elsewhere)
        assert raised.value.key_id == "k1"
        assert (raised.value.code, status_for(raised.value)) == ("encrypted_value_unreadable", 500)


def test_an_altered_value_does_not_open() -> None:
    sealing = cipher(key("k1"))
    stored = sealing.seal("approve the refund", HERE)
    prefix, _, encoded = stored.rpartition(":")
    raw = bytearray(base64.b64decode(encoded))
    raw[-1] ^= 1
    with pytest.raises(EncryptedValueUnreadable):
        sealing.open(f"{prefix}:{base64.b64encode(bytes(raw)).decode()}", HERE)
    with pytest.raises(EncryptedValueUnreadable):
        sealing.open(f"{prefix}:not base64!", HERE)


def test_older_keys_still_open_and_a_missing_key_is_named() -> None:
    k1, k2 = key("k1"), key("k2")
    stored = cipher(k1).seal("hello", HERE)
    rotated = cipher(f"{k2},{k1}")
    assert rotated.active_key_id == "k2"
    assert rotated.open(stored, HERE) == "hello"
    assert rotated.key_id_of(rotated.seal("hello", HERE)) == "k2"
    with pytest.raises(EncryptionKeyUnavailable) as raised:
        cipher(k2).open(stored, HERE)
    assert raised.value.key_id == "k1"
    assert "'k1'" in raised.value.message and "messages.body" in raised.value.message
    assert status_for(raised.value) == 500
    with pytest.raises(EncryptionKeyUnavailable):
        PLAINTEXT.open(stored, HERE)


def test_plaintext_reads_as_it_is_and_only_a_reserved_prefix_is_escaped() -> None:
    assert PLAINTEXT.seal("hello", HERE) == "hello"
    assert cipher(key("k1")).open("written before encryption", HERE) == "written before encryption"
    tricky = "sursis:enc:1:k1:AAAA"
    stored = PLAINTEXT.seal(tricky, HERE)
    assert stored == "sursis:plain:" + tricky
    assert PLAINTEXT.key_id_of(stored) is None
    assert PLAINTEXT.open(stored, HERE) == tricky


def test_json_columns_store_a_sealed_string_and_read_back_the_document() -> None:
    row = {"correlation_id": "c-1"}
    args = {"event_id": "evt_1", "reason": "because"}
    sealing = cipher(key("k1"))
    stored = PENDING_CALLS.seal_value(sealing, "args", args, row)
    assert isinstance(stored, str) and stored.startswith("sursis:enc:1:k1:")
    assert PENDING_CALLS.open_value(sealing, "args", stored, row) == args
    assert PENDING_CALLS.open_value(sealing, "args", args, row) == args  # plaintext row
    assert PENDING_CALLS.seal_value(PLAINTEXT, "args", args, row) is args
    assert PENDING_CALLS.seal_value(sealing, "resolution", None, row) is None
    with pytest.raises(EncryptedValueUnreadable):
        PENDING_CALLS.open_value(sealing, "args", stored, {"correlation_id": "c-2"})


@pytest.mark.parametrize(
    "text",
    [
        "k1",
        "k1:" + base64.b64encode(b"short").decode(),
        "k1:###",
        "bad id!:" + base64.b64encode(bytes(32)).decode(),
        "k1:{0},k1:{0}".format(base64.b64encode(bytes(32)).decode()),
    ],
)
def test_a_malformed_keyring_is_refused_without_showing_key_material(text: str) -> None:
    with pytest.raises(KeyringInvalid) as raised:
        LocalKeyring.parse(text)
    assert base64.b64encode(bytes(32)).decode() not in raised.value.message


def test_the_keyring_comes_from_the_variable_or_the_file_and_never_prints(tmp_path: Path) -> None:
    k1, k2 = key("k1"), key("k2")
    path = tmp_path / "keys"
    path.write_text(f"# rotated 2026-11\n{k2}\n{k1}\n")
    path.chmod(0o600)
    assert load_keyring(None, path).key_ids == ("k2", "k1")
    assert load_keyring(k1, path).key_ids == ("k1",)
    assert load_keyring(None, None).active_key_id is None
    with pytest.raises(KeyringInvalid, match="cannot read"):
        load_keyring(None, tmp_path / "missing")
    keyring = LocalKeyring.parse(f"{k1},{k2}")
    assert k1.split(":")[1] not in repr(keyring)
    settings = Settings(encryption_keys=k1)
    assert k1.split(":")[1] not in repr(settings) + str(settings.model_dump())


def test_a_keyring_file_is_followed_as_it_changes_and_a_broken_edit_keeps_the_last_good_one(
    tmp_path: Path,
) -> None:
    old, new = key("old"), key("new")
    path = tmp_path / "keys"
    path.write_text(f"{old}\n")
    path.chmod(0o600)
    now = [0.0]
    keyring = FileKeyring(path, interval=1.0, clock=lambda: now[0])
    sealing = AesGcmCipher(keyring)
    before = sealing.seal("hello", HERE)
    assert keyring.active_key_id == "old"

    path.write_text(f"{new}\n{old}\n")
    assert keyring.active_key_id == "old"  # looked at once per interval, not per value
    now[0] = 1.5
    assert keyring.active_key_id == "new"
    assert sealing.key_id_of(sealing.seal("hello", HERE)) == "new"
    assert sealing.open(before, HERE) == "hello"

    path.write_text("new:not-a-key\n")
    now[0] = 3.0
    assert keyring.key_ids == ("new", "old")
    assert "not-a-key" not in repr(keyring)
