//! UTF-16 surrogate pairs split across streamed events. A provider (or a JavaScript proxy in
//! front of one) that slices text by UTF-16 code units may end one event's string with the
//! first half of a pair (`"…\ud83d"`) and start the next event's string with the second
//! (`"\ude00…"`). Each event is valid JSON for JavaScript, but not text a Rust `String` can
//! hold, so [`Surrogates::mend`] rewrites the event's JSON before it is parsed: a lone first
//! half at the end of a string is held back and put in front of the lone second half that starts
//! a string of the next event, making one whole character there; any other lone half becomes
//! U+FFFD, the replacement character.

use std::borrow::Cow;

/// What one stream holds back between its events: a lone first half that ended a string.
#[derive(Clone, Debug, Default)]
pub(crate) struct Surrogates {
    held: Option<u16>,
}

/// A `\uXXXX` escape at `at` in `bytes`, as its code unit.
fn escape_at(bytes: &[u8], at: usize) -> Option<u16> {
    if bytes.get(at) != Some(&b'\\') || bytes.get(at + 1) != Some(&b'u') {
        return None;
    }
    let hex = std::str::from_utf8(bytes.get(at + 2..at + 6)?).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

fn is_high(u: u16) -> bool {
    (0xD800..0xDC00).contains(&u)
}

fn is_low(u: u16) -> bool {
    (0xDC00..0xE000).contains(&u)
}

impl Surrogates {
    /// `data` (one event's JSON text) with its lone surrogate halves mended as the module says.
    /// Text without any is returned as it is, without a copy.
    pub(crate) fn mend<'d>(&mut self, data: &'d str) -> Cow<'d, str> {
        let held = self.held.take();
        // Nearly every event has no surrogate escape at all: look before copying.
        if held.is_none() && !has_surrogate_escape(data) {
            return Cow::Borrowed(data);
        }
        let bytes = data.as_bytes();
        let mut out = String::with_capacity(data.len() + 6);
        let (mut i, mut copied) = (0, 0);
        let mut in_string = false;
        let mut string_start = usize::MAX;
        let mut held = held;
        while i < bytes.len() {
            match bytes[i] {
                b'"' => {
                    in_string = !in_string;
                    string_start = if in_string { i + 1 } else { usize::MAX };
                    i += 1;
                }
                b'\\' if in_string => {
                    let Some(unit) = escape_at(bytes, i) else {
                        i += 2; // an escaped character of any other kind
                        continue;
                    };
                    if is_high(unit) && escape_at(bytes, i + 6).is_some_and(is_low) {
                        i += 12; // a whole pair
                        continue;
                    }
                    out.push_str(&data[copied..i]);
                    if is_high(unit) && bytes.get(i + 6) == Some(&b'"') {
                        self.held = Some(unit); // its second half may start the next event
                    } else if let (true, Some(h), true) = (is_low(unit), held, i == string_start) {
                        out.push_str(&format!("\\u{h:04x}"));
                        out.push_str(&data[i..i + 6]);
                        held = None;
                    } else if is_high(unit) || is_low(unit) {
                        out.push_str("\\ufffd");
                    } else {
                        out.push_str(&data[i..i + 6]);
                    }
                    i += 6;
                    copied = i;
                }
                _ => i += 1,
            }
        }
        out.push_str(&data[copied..]);
        Cow::Owned(out)
    }
}

/// Whether `data` may hold an escape of a surrogate half (`\ud800` to `\udfff`, any case).
fn has_surrogate_escape(data: &str) -> bool {
    data.as_bytes().windows(3).any(|w| w[0] == b'\\' && w[1] == b'u' && (w[2] == b'd' || w[2] == b'D'))
}

#[cfg(test)]
mod tests {
    use super::Surrogates;

    fn text(json: &str) -> String {
        serde_json::from_str::<serde_json::Value>(json).unwrap()["t"].as_str().unwrap().to_owned()
    }

    #[test]
    fn a_pair_split_across_two_events_becomes_one_character() {
        let mut s = Surrogates::default();
        let a = s.mend(r#"{"t":"hi \ud83d"}"#).into_owned();
        let b = s.mend(r#"{"t":"\ude00 there"}"#).into_owned();
        assert_eq!(text(&a) + &text(&b), "hi 😀 there");
    }

    #[test]
    fn whole_pairs_and_other_escapes_are_left_alone() {
        let mut s = Surrogates::default();
        for json in [r#"{"t":"a \ud83d\ude00 b"}"#, r#"{"t":"\\ud83d \n \" é"}"#, r#"{"t":"plain"}"#] {
            assert_eq!(s.mend(json), json);
        }
    }

    #[test]
    fn lone_halves_elsewhere_become_the_replacement_character() {
        let mut s = Surrogates::default();
        assert_eq!(text(&s.mend(r#"{"t":"a\ud83db"}"#)), "a\u{fffd}b");
        assert_eq!(text(&s.mend(r#"{"t":"a\ude00"}"#)), "a\u{fffd}");
        // A held first half that the next event does not complete is dropped with it.
        let _ = s.mend(r#"{"t":"x\uD83D"}"#);
        assert_eq!(text(&s.mend(r#"{"t":"y\uDE00"}"#)), "y\u{fffd}");
        assert_eq!(text(&s.mend(r#"{"t":"z"}"#)), "z");
    }
}
