//! The functions kro's CEL environment adds to the standard one, with kro's meaning, so
//! an imported ResourceGraphDefinition computes what it computed under kro.

use std::hash::Hasher;

use cel::common::types::{CelBytes, CelString};
use cel::{DeclarationError, Env};
use md5::Digest;

/// Registers kro's functions on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    cel::add_overload!(env, fn sha256: (CelString) -> CelBytes, name = "hash.sha256")?;
    cel::add_overload!(env, fn md5: (CelString) -> CelBytes, name = "hash.md5")?;
    cel::add_overload!(env, fn fnv64a: (CelString) -> CelBytes, name = "hash.fnv64a")?;
    Ok(())
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
