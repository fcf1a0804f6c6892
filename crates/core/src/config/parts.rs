//! How a configuration part may be written: serde `deserialize_with` readers shared by the
//! config's parts (an object, `null`, or `true`/`false` for a switch).

use serde::{Deserialize, Deserializer};
use serde_json::Value as Json;

/// A part that `true`, an object or nothing turns on and `false` or `null` off: `Some` of its
/// defaults for `true`, of what the object says for an object.
pub(super) fn switch<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> std::result::Result<Option<T>, D::Error> {
    use serde::de::Error as _;
    match Json::deserialize(d)? {
        Json::Null | Json::Bool(false) => Ok(None),
        Json::Bool(true) => Ok(Some(T::default())),
        v @ Json::Object(_) => T::deserialize(v).map(Some).map_err(D::Error::custom),
        _ => Err(D::Error::custom("must be an object, true or false")),
    }
}

/// A part written as an object; `null` means its defaults. (serde would also read a struct from
/// an array, by position: refused.)
pub(super) fn or_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> std::result::Result<T, D::Error> {
    Ok(object(d)?.unwrap_or_default())
}

/// A part written as an object, or `null` (none).
pub(super) fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> std::result::Result<Option<T>, D::Error> {
    use serde::de::Error as _;
    match Json::deserialize(d)? {
        Json::Null => Ok(None),
        v @ Json::Object(_) => T::deserialize(v).map(Some).map_err(D::Error::custom),
        _ => Err(D::Error::custom("must be an object")),
    }
}
