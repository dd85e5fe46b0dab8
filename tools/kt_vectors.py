#!/usr/bin/env python3
"""docs/E2E.md §18 test vectors (the key directory log), computed from the spec's text alone.

Merkle tree hashing as RFC 9162 §2.1 (leaf SHA-256(0x00 ‖ data), node SHA-256(0x01 ‖ l ‖ r),
split at the largest power of two below n), audit paths and consistency proofs by the RFC's
recursive definitions, and a tree head signed with Ed25519 (Python `cryptography`).
Tests/SIMPE2ETests/MerkleTreeTests checks the Swift code against the printed values.
Run: python3 tools/kt_vectors.py
"""
import hashlib
import struct

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def leaf(data):
    return hashlib.sha256(b"\x00" + data).digest()


def node(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def split(n):
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves):
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaf(leaves[0])
    k = split(len(leaves))
    return node(mth(leaves[:k]), mth(leaves[k:]))


def path(m, leaves):
    if len(leaves) <= 1:
        return []
    k = split(len(leaves))
    if m < k:
        return path(m, leaves[:k]) + [mth(leaves[k:])]
    return path(m - k, leaves[k:]) + [mth(leaves[:k])]


def subproof(m, leaves, complete):
    if m == len(leaves):
        return [] if complete else [mth(leaves)]
    k = split(len(leaves))
    if m <= k:
        return subproof(m, leaves[:k], complete) + [mth(leaves[k:])]
    return subproof(m - k, leaves[k:], False) + [mth(leaves[:k])]


LEAVES = [("leaf %d" % i).encode() for i in range(7)]

for n in range(0, 8):
    print("root_%d = %s" % (n, mth(LEAVES[:n]).hex()))
for index in (0, 2, 6):
    print("inclusion_%d_of_7 = %s" % (index, ",".join(h.hex() for h in path(index, LEAVES))))
for old in (1, 3, 4, 6):
    print("consistency_%d_to_7 = %s" % (old, ",".join(h.hex() for h in subproof(old, LEAVES, True))))

# A tree head: the relay key's seed is 0x50, 0x51, … 0x6f; size 7, the root above, time 1,700,000,000,000 ms.
seed = bytes((0x50 + i) % 256 for i in range(32))
relay = Ed25519PrivateKey.from_private_bytes(seed)
body = b"\x01" + struct.pack(">Q", 7) + mth(LEAVES) + struct.pack(">Q", 1_700_000_000_000)
head = body + relay.sign(b"SIMP-E2E v1 tree head" + body)
print("relay_tree_key = %s" % relay.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex())
print("tree_head = %s" % head.hex())
print("gossip_checkpoint = %s" % (struct.pack(">Q", 7) + mth(LEAVES)).hex())
