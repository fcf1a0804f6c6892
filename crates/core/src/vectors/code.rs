//! A vector as stored (little-endian `f32`s) and as the index in memory compares it: one sign
//! bit per dimension (the first [`MAX_BITS`]), packed into `u64` words, hamming distance by
//! popcount; cosine similarity for the exact re-rank; the hash of an embedded text.

/// Most dimensions a code keeps: 512 bits (64 bytes), whatever the model's size, so the
/// index's memory per item does not grow past it with 768- or 1024-dimension models.
pub(crate) const MAX_BITS: usize = 512;

/// A vector as stored: little-endian `f32`s.
pub(crate) fn encode(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// A stored vector.
pub(crate) fn decode(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// `u64` words of the code of a vector of `dims` dimensions.
pub(crate) fn words(dims: usize) -> usize {
    dims.min(MAX_BITS).div_ceil(64)
}

/// The sign code of `v`: bit `i` is set when dimension `i` is positive (up to [`MAX_BITS`]).
pub(crate) fn sign_code(v: &[f32]) -> Vec<u64> {
    let mut code = vec![0_u64; words(v.len())];
    for (i, x) in v.iter().take(MAX_BITS).enumerate() {
        if *x > 0.0 {
            code[i / 64] |= 1 << (i % 64);
        }
    }
    code
}

/// A code as stored: its words as little-endian bytes.
pub(crate) fn code_bytes(code: &[u64]) -> Vec<u8> {
    code.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A stored code (`None` when its length is not whole words).
pub(crate) fn code_words(b: &[u8]) -> Option<Vec<u64>> {
    if !b.len().is_multiple_of(8) {
        return None;
    }
    Some(b.chunks_exact(8).map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect())
}

/// Bits that differ between two codes of the same length.
pub(crate) fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// Cosine similarity; 0 for vectors of different lengths or of zero norm.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// The 64-bit FNV-1a hash of an embedded text, as stored (SQLite integers are signed; never 0,
/// the hash of vectors stored before their texts were hashed).
pub(crate) fn text_hash(text: &str) -> i64 {
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    match h as i64 {
        0 => 1,
        h => h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_count_differing_signs() {
        let v: Vec<f32> = (0..70).map(|i| if i % 3 == 0 { 0.5 } else { -0.25 }).collect();
        let code = sign_code(&v);
        assert_eq!(code.len(), 2);
        assert_eq!(code_words(&code_bytes(&code)).unwrap(), code);
        assert_eq!(decode(&encode(&v)), v);
        let flipped: Vec<f32> = v.iter().map(|x| -x).collect();
        assert_eq!(hamming(&code, &sign_code(&flipped)), 70);
        assert_eq!(hamming(&code, &code), 0);
        assert_eq!(words(1024), MAX_BITS / 64, "a code keeps at most 512 dimensions");
        assert_eq!(code_words(&[1, 2, 3]), None);
    }

    #[test]
    fn cosine_and_hash() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - 0.5_f64.sqrt()).abs() < 1e-9);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 2.0]), 0.0);
        assert_ne!(text_hash("a"), text_hash("b"));
        assert_eq!(text_hash("same"), text_hash("same"));
    }
}
