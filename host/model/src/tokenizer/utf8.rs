//! Incremental UTF-8 assembly for streamed tokens: byte pieces are joined across tokens and only
//! complete characters are released; invalid sequences become U+FFFD exactly where
//! `String::from_utf8_lossy` would put them, never a panic. The one assembler: [`StreamDecoder`]
//! and the engine's generations both use it.
//!
//! [`StreamDecoder`]: super::StreamDecoder

/// Bytes waiting for the rest of a multi-byte character.
#[derive(Debug, Default)]
pub struct Utf8Buf {
    pending: Vec<u8>,
}

impl Utf8Buf {
    /// A buffer with room for `bytes` pending bytes.
    pub fn with_capacity(bytes: usize) -> Utf8Buf {
        Utf8Buf {
            pending: Vec::with_capacity(bytes),
        }
    }

    /// Appends `bytes` and returns every complete character now available.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        let mut out = String::new();
        self.push_into(bytes, &mut out);
        out
    }

    /// [`Utf8Buf::push`] appending to `out` (no allocation once both buffers have room).
    pub fn push_into(&mut self, bytes: &[u8], out: &mut String) {
        self.pending.extend_from_slice(bytes);
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: keep it for the next piece.
                        None => {
                            self.pending.drain(..valid);
                            return;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Releases whatever is left (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_split_characters_and_replaces_bad_bytes() {
        let mut b = Utf8Buf::default();
        let llama = "🦙".as_bytes();
        assert_eq!(b.push(&llama[..1]), "");
        assert_eq!(b.push(&llama[1..3]), "");
        assert_eq!(b.push(&[llama[3], b'a']), "🦙a");
        assert_eq!(b.push(&[0xff, b'b']), "\u{FFFD}b");
        assert_eq!(b.push(&llama[..2]), "");
        assert_eq!(b.finish(), "\u{FFFD}");
    }

    #[test]
    fn any_split_gives_the_lossy_decode_of_the_whole() {
        let texts: [&[u8]; 5] = [
            "añ🦙€x".as_bytes(),
            b"\xf0\x9f\xa6",
            b"a\xe2\x82b\xff\xc3",
            b"\xed\xa0\x80z\xf4\x90\x80\x80",
            b"",
        ];
        for bytes in texts {
            let want = String::from_utf8_lossy(bytes);
            for i in 0..=bytes.len() {
                for j in i..=bytes.len() {
                    let mut b = Utf8Buf::default();
                    let mut got = b.push(&bytes[..i]);
                    got.push_str(&b.push(&bytes[i..j]));
                    b.push_into(&bytes[j..], &mut got);
                    got.push_str(&b.finish());
                    assert_eq!(got, want, "{bytes:?} split at {i} and {j}");
                }
            }
        }
    }
}
