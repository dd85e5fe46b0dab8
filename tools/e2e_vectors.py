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
from cryptography.hazmat.primitives.asymmetric.mlkem import MLKEM768PrivateKey
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


# §4.1: ML-KEM encapsulation draws its own randomness, so the vector fixes one ciphertext to
# Bob's KEM prekey (made once with this key's encapsulate) and checks decapsulation.
KEM_CIPHERTEXT = bytes.fromhex(
    "cdaf1fae69d521eff340058e4ceb33f09b7f2063fe3224dfb812004b3058b175b52215f796122ae7f12320595deeae81"
    "6789c6606d2e88d872fbce5361bf5c11ddf19f869ef9ee68b909116f4e6315032f10832205a6cc6e5311e07374d5f0b7"
    "2aa32fef4412a08be830c90dacf762655aca49800417b9b01749fbd3d2159aaae2535ecd36c7e2a6afd989dd35c77f1b"
    "69f1d814f6987f1ee756406ce5cb8da7ff6e65d86881cc4848db7a68073272bd59eb4db34e9f3b8413b488e0704bcbb4"
    "617dd5eecb1448c8c70aadae89047db77ed4db8eb3c5708a97238523aeac325692b59aece24cb56f7084898b7dd3375d"
    "d8cb2841ad3ff1fce6efb60470167096391f8d9c42e61532697b1c2a46a396f52e0cc08bccdc99859351b429917f7311"
    "2786b0c8295a4517e901d80f7cffc3383165e42ee15266b5cfa1133920734a6cf858956e8d4248b0c0ae699c2af7e42a"
    "af794b475714c84cb5b51c66800c25f9df77d8582dcecebed4fda244f01b241d696fc2767e9dba2f49a7c2aeac090859"
    "76faa312aa1063b80792689402fa237adf4cab3be655c53f037e1dd715ed0003cd263282ab17d4fb76bd50aee0c636bf"
    "f799e9465089843243911532918d477bb15213efbe064a8f392d79a91915ef02b5364945d8f02bc15a7919a5e3a2eb6c"
    "6748dff607ab071e3b0751198382ba59217f5ca87a8e3e910751f1d9fcdb11984ed932b62a00352eea4753d2c1840288"
    "e2c5ca67e23bad4e51d026def8edb30b1b573348a50509ffb7792f7a81545b26cd9a3d38f145711c5fbae88b11e01b59"
    "8a6183ea59e1ab84287aeb0b73236f1b0802833d640b783f13b892709fda4f6beab000b2594e68e99accde10a73c50cb"
    "f2b70921b99d009e3a97efe1e8cd1487be09b1e8b03415055d73657d0f456ff8430d9aea1032e66b3e0c7fb3eb585247"
    "dbb5212c4ad78bc056b1b2dc2a9b62e6665390d220f984976a65be381d3ecd1f41bdb1e8fd202e926cc809c86592e917"
    "11decbef7c374538de2638968a963dea3f9bf1b760cefcfc90dd53386fb72a219dcf405ddd1a4faaabebacc631acc6db"
    "aad588fdc4fe88613a38d0f90a8da32b654323894aa36f1496ad9b05a7db84dd97dcd23fefe87190a3985521b6f67b17"
    "4a5eae0acbca717be97444dc7fc79a3c1e316fa19e7970220e073391b7bbe96cbede65c4f20d5909483682d894c115d0"
    "10c8008f74f2397c9c3e5b1d97fbf80d3a4507f5921d7cdcec2ef66d5196ba494d26f4cf6167bfa51016bb1aa9f8b9dd"
    "0bb453ca774c505497f51549df1dd6f178a3c6df8d0681e9aedccfd305307c835a34661b126018f16f237899d60d3cf3"
    "ea6bd00a7af10d3d6201ea1527ca99b79ff9b9fc86e9aa61a55e08092cdf23197ad71f91d556f4abf18607653575fbef"
    "95d265f5127b8902cc69e4bffa0462669d8051647e4a97ffe771085b76f65e53d6491561a84e33ad1ba827ac08aa469f"
    "7052d88250137d30c5ceab33e633d3cb48b74e112ec11380b11d63561d380daa"
)

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

    # §4.1 the same start with Bob's KEM prekey (id 3, seed key(0x60) ‖ key(0x80)).
    kem = MLKEM768PrivateKey.from_seed_bytes(key(0x60) + key(0x80))
    kem_public = kem.public_key().public_bytes_raw()
    kem_signature = Ed25519PrivateKey.from_private_bytes(bob_ed).sign(b"SIMP-E2E v1 kem prekey" + u32(3) + kem_public)
    v["bundle_pq_sha256"] = hashlib.sha256(v["bundle"] + u32(3) + kem_public + kem_signature).digest()
    v["kem_ciphertext_sha256"] = hashlib.sha256(KEM_CIPHERTEXT).digest()
    v["kem_shared_secret"] = kem.decapsulate(KEM_CIPHERTEXT)
    v["session_secret_pq"] = hkdf(b"\xff" * 32 + b"".join(dhs) + v["kem_shared_secret"], bytes(32),
                                  b"SIMP-E2E v1 session start" + alice_identity + bob_identity, 32)

    # §8 a room post with a sender key: key id 0x01020304, chain key key(0x20), signing seed key(0x40).
    room = b"ops"
    chain, signing = key(0x20), key(0x40)
    v["distribution"] = b"\x01\x04" + u16(len(room)) + room + u32(0x01020304) + u32(0) + chain + ed_public(signing)
    _, message_key = chain_step(chain)
    header = b"\x01\x03" + u32(0x01020304) + u32(0)
    body = header + seal(message_key, b"SIMP-E2E v1 room message", b"vault code 4417", u16(len(room)) + room + header)
    signed = b"SIMP-E2E v1 room signature" + u16(len(room)) + room + body
    v["room_post"] = body + Ed25519PrivateKey.from_private_bytes(signing).sign(signed)

    # §3.4 bob's device list: user key seed key(0xc0), counter 1, his device "phone" (IK_B).
    user_key = key(0xC0)
    listed = b"\x01" + ed_public(user_key) + u16(3) + b"bob" + struct.pack(">Q", 1) + u16(1) + u16(5) + b"phone" + bob_identity
    v["user_key"] = ed_public(user_key)
    v["device_list"] = listed + Ed25519PrivateKey.from_private_bytes(user_key).sign(b"SIMP-E2E v1 device list" + listed)

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
