//! The functions kro's CEL environment adds to the standard one, with kro's meaning, so
//! an imported ResourceGraphDefinition computes what it computed under kro: its hashes and
//! seeded random values here, its JSON, map and list functions and `omit()` beside.

mod json;
mod values;

use std::hash::Hasher;

use cel::common::types::{CelBytes, CelInt, CelString};
use cel::{DeclarationError, Env, ExecutionError};
use md5::Digest;

pub use values::{holds_omit, is_omit};

/// The characters `random.seededString` picks from, in kro's order.
const ALPHANUMERIC: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// Registers kro's functions on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    cel::add_overload!(env, fn sha256: (CelString) -> CelBytes, name = "hash.sha256")?;
    cel::add_overload!(env, fn md5: (CelString) -> CelBytes, name = "hash.md5")?;
    cel::add_overload!(env, fn fnv64a: (CelString) -> CelBytes, name = "hash.fnv64a")?;
    cel::add_overload!(
        env,
        fn seeded_string: (CelInt, CelString) -> Result<CelString>,
        name = "random.seededString"
    )?;
    cel::add_overload!(
        env,
        fn seeded_int: (CelInt, CelInt, CelString) -> Result<CelInt>,
        name = "random.seededInt"
    )?;
    json::extension(env)?;
    values::extension(env)
}

/// `hash.sha256(string)`: the SHA-256 of the string's UTF-8 bytes.
fn sha256(text: &CelString<'_>) -> CelBytes<'static> {
    sha2::Sha256::digest(text.inner().as_bytes()).to_vec().into()
}

/// `hash.md5(string)`: the MD5 of the string's UTF-8 bytes.
fn md5(text: &CelString<'_>) -> CelBytes<'static> {
    md5::Md5::digest(text.inner().as_bytes()).to_vec().into()
}

/// `hash.fnv64a(string)`: FNV-1a, 64 bits, big-endian as Go's `Sum` appends it.
fn fnv64a(text: &CelString<'_>) -> CelBytes<'static> {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(text.inner().as_bytes());
    hasher.finish().to_be_bytes().to_vec().into()
}

/// `random.seededString(length, seed)`: character `i` is chosen by the big-endian `u32`
/// at byte `4i mod 32` of the seed's SHA-256. kro reads the digest this way, so a string
/// longer than 8 repeats itself every 8 characters; Stencil keeps that, because a
/// password derived under kro must stay the same after a takeover.
fn seeded_string(length: &CelInt, seed: &CelString<'_>) -> Result<CelString<'static>, ExecutionError> {
    let length = usize::try_from(*length.inner())
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| random_error("random.seededString", "length must be positive"))?;
    let digest = sha2::Sha256::digest(seed.inner().as_bytes());
    let text: String = (0..length)
        .map(|i| {
            let start = (i * 4) % digest.len();
            let word = u32::from_be_bytes(digest[start..start + 4].try_into().expect("4 bytes"));
            char::from(ALPHANUMERIC[word as usize % ALPHANUMERIC.len()])
        })
        .collect();
    Ok(text.into())
}

/// `random.seededInt(min, max, seed)`: `min` plus the first 8 bytes of the seed's SHA-256,
/// big-endian, modulo `max - min`, as kro computes it.
fn seeded_int(min: &CelInt, max: &CelInt, seed: &CelString<'_>) -> Result<CelInt, ExecutionError> {
    let (min, max) = (*min.inner(), *max.inner());
    if min >= max {
        return Err(random_error("random.seededInt", "min must be less than max"));
    }
    let digest = sha2::Sha256::digest(seed.inner().as_bytes());
    let word = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    let range = max.wrapping_sub(min) as u64;
    Ok(min.wrapping_add((word % range) as i64).into())
}

fn random_error(function: &str, message: &str) -> ExecutionError {
    ExecutionError::function_error(function, message)
}
