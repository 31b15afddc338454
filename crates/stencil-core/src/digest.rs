//! A stable 64-bit digest of two strings, for choices that must come out the same in
//! every process and after every restart (sharding's owner, a rollout's share).

use sha2::{Digest, Sha256};

/// The first eight bytes of `sha256(first \0 second)`, big-endian.
pub fn pair(first: &str, second: &str) -> u64 {
    let mut hash = Sha256::new();
    hash.update(first.as_bytes());
    hash.update([0]);
    hash.update(second.as_bytes());
    let digest = hash.finalize();
    u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 digest has 32 bytes"))
}
