#!/usr/bin/env python3
"""docs/E2E.md test vectors, computed independently of the Swift code from the spec's text.

Uses the Python `cryptography` package (X25519, Ed25519, HKDF-SHA-256, HMAC-SHA-256,
AES-256-GCM). Prints every value of §11 as `name = hex`; Tests/SIMPE2ETests/TestVectorTests
checks the Swift implementation against the same values. Run: python3 tools/e2e_vectors.py
"""
import hashlib
import hmac
import struct

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

RAW = dict(encoding=serialization.Encoding.Raw, format=serialization.PublicFormat.Raw)


def key(first):
    """The vectors' private keys: 32 bytes counting up from `first` (mod 256)."""
    return bytes((first + i) % 256 for i in range(32))


def x_public(private):
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes(**RAW)


def ed_public(seed):
    return Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(**RAW)


def dh(private, public):
    return X25519PrivateKey.from_private_bytes(private).exchange(X25519PublicKey.from_public_bytes(public))


def hkdf(ikm, salt, info, length):
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def chain_step(chain_key):
    """KDF_CK: (next chain key, message key)."""
    return hmac.new(chain_key, b"\x02", hashlib.sha256).digest(), hmac.new(chain_key, b"\x01", hashlib.sha256).digest()


def root_step(root_key, agreement):
    out = hkdf(agreement, root_key, b"SIMP-E2E v1 ratchet", 64)
    return out[:32], out[32:]


def seal(message_key, info, plaintext, associated_data):
    out = hkdf(message_key, bytes(32), info, 44)
    return AESGCM(out[:32]).encrypt(out[32:], plaintext, associated_data)


u16 = lambda v: struct.pack(">H", v)
u32 = lambda v: struct.pack(">I", v)


def vectors():
    v = {}
    alice_x, alice_ed = key(0x10), key(0x30)
    bob_x, bob_ed = key(0x50), key(0x70)
    bob_spk, bob_opk = key(0x90), key(0xB0)
    alice_ephemeral, alice_ratchet, bob_ratchet = key(0xD0), key(0xE0), key(0xF0)
    alice_identity = x_public(alice_x) + ed_public(alice_ed)
    bob_identity = x_public(bob_x) + ed_public(bob_ed)
    v["alice_identity"], v["bob_identity"] = alice_identity, bob_identity

    # §3 key bundle: signed prekey id 1, one-time prekey id 2.
    spk_public, opk_public = x_public(bob_spk), x_public(bob_opk)
    signature = Ed25519PrivateKey.from_private_bytes(bob_ed).sign(b"SIMP-E2E v1 signed prekey" + u32(1) + spk_public)
    v["bundle"] = b"\x01" + bob_identity + u32(1) + spk_public + signature + u16(1) + u32(2) + opk_public

    # §4 session start.
    base = x_public(alice_ephemeral)
    dhs = [dh(alice_x, spk_public), dh(alice_ephemeral, bob_identity[:32]),
           dh(alice_ephemeral, spk_public), dh(alice_ephemeral, opk_public)]
    secret = hkdf(b"\xff" * 32 + b"".join(dhs), bytes(32),
                  b"SIMP-E2E v1 session start" + alice_identity + bob_identity, 32)
    v["session_secret"] = secret
    root, alice_chain = root_step(secret, dh(alice_ratchet, spk_public))
    v["alice_root_key_1"], v["alice_sending_chain_1"] = root, alice_chain

    # §7.2 the first message, a prekey message.
    session_ad = alice_identity + bob_identity
    alice_chain, message_key = chain_step(alice_chain)
    v["alice_message_key_0"] = message_key
    prefix = (b"\x01\x01" + b"\x01" + alice_identity + base + u32(1) + u32(2)
              + x_public(alice_ratchet) + u32(0) + u32(0))
    v["message_1"] = prefix + seal(message_key, b"SIMP-E2E v1 message", b"the eagle lands at midnight", session_ad + prefix)

    # §7.1 bob's reply: bob's DH ratchet step, then his first message.
    root, bob_receiving = root_step(secret, dh(bob_spk, x_public(alice_ratchet)))
    assert bob_receiving == v["alice_sending_chain_1"]
    root, bob_chain = root_step(root, dh(bob_ratchet, x_public(alice_ratchet)))
    _, message_key = chain_step(bob_chain)
    prefix = b"\x01\x02" + x_public(bob_ratchet) + u32(0) + u32(0)
    v["message_2"] = prefix + seal(message_key, b"SIMP-E2E v1 message", b"roger", session_ad + prefix)

    # §8 a room post with a sender key: key id 0x01020304, chain key key(0x20), signing seed key(0x40).
    room = b"ops"
    chain, signing = key(0x20), key(0x40)
    v["distribution"] = b"\x01\x04" + u16(len(room)) + room + u32(0x01020304) + u32(0) + chain + ed_public(signing)
    _, message_key = chain_step(chain)
    header = b"\x01\x03" + u32(0x01020304) + u32(0)
    body = header + seal(message_key, b"SIMP-E2E v1 room message", b"vault code 4417", u16(len(room)) + room + header)
    signed = b"SIMP-E2E v1 room signature" + u16(len(room)) + room + body
    v["room_post"] = body + Ed25519PrivateKey.from_private_bytes(signing).sign(signed)

    # §10 safety number of alice and bob.
    halves = []
    for user, identity in ((b"alice", alice_identity), (b"bob", bob_identity)):
        digest = hashlib.sha512(b"SIMP-E2E v1 safety number" + u16(len(user)) + user + identity).digest()
        halves.append("".join("%05d" % (int.from_bytes(digest[i * 5:i * 5 + 5], "big") % 100000) for i in range(6)))
    digits = "".join(sorted(halves))
    v["safety_number"] = " ".join(digits[i:i + 5] for i in range(0, 60, 5))
    return v


if __name__ == "__main__":
    for name, value in vectors().items():
        print(f"{name} = {value if isinstance(value, str) else value.hex()}")
