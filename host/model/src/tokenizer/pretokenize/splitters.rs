//! llama.cpp's hand-written splitters for the GPT-2 and Llama-3 pre-tokenizer expressions,
//! over codepoints, segment by segment.

use super::unicode::{self, LETTER, NUMBER};

/// A view of one segment: codepoints outside it read as "out of range".
struct Segment<'a> {
    cpts: &'a [char],
    ini: usize,
    end: usize,
}

impl Segment<'_> {
    fn cpt(&self, pos: usize) -> Option<char> {
        (self.ini <= pos && pos < self.end).then(|| self.cpts[pos])
    }
    fn flags(&self, pos: usize) -> u8 {
        self.cpt(pos).map_or(0, unicode::flags)
    }
}

const NOT_WS_L_N: u8 = unicode::WHITESPACE | LETTER | NUMBER;

/// llama.cpp's hand-written GPT-2 splitter:
/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
pub(super) fn split_gpt2(cpts: &[char], offsets: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(offsets.len());
    let mut start = 0;
    for &len in offsets {
        let seg = Segment {
            cpts,
            ini: start,
            end: start + len,
        };
        start += len;
        let mut prev_end = seg.ini;
        let mut add = |end: usize, out: &mut Vec<usize>| -> usize {
            let n = end - prev_end;
            if n > 0 {
                out.push(n);
            }
            prev_end = end;
            n
        };
        let mut pos = seg.ini;
        while pos < seg.end {
            let cpt = seg.cpt(pos);
            let flags = seg.flags(pos);
            if cpt == Some('\'') && pos + 1 < seg.end {
                let next = seg.cpt(pos + 1);
                if matches!(next, Some('s' | 't' | 'm' | 'd')) {
                    pos += add(pos + 2, &mut out);
                    continue;
                }
                if pos + 2 < seg.end {
                    let next2 = seg.cpt(pos + 2);
                    if matches!(
                        (next, next2),
                        (Some('r'), Some('e')) | (Some('v'), Some('e')) | (Some('l'), Some('l'))
                    ) {
                        pos += add(pos + 3, &mut out);
                        continue;
                    }
                }
            }
            let space = cpt == Some(' ');
            let mut flags2 = if space { seg.flags(pos + 1) } else { flags };
            if flags2 & LETTER != 0 {
                pos += usize::from(space);
                while flags2 & LETTER != 0 {
                    pos += 1;
                    flags2 = seg.flags(pos);
                }
                add(pos, &mut out);
                continue;
            }
            if flags2 & NUMBER != 0 {
                pos += usize::from(space);
                while flags2 & NUMBER != 0 {
                    pos += 1;
                    flags2 = seg.flags(pos);
                }
                add(pos, &mut out);
                continue;
            }
            if flags2 & NOT_WS_L_N == 0 && flags2 != 0 {
                pos += usize::from(space);
                while flags2 & NOT_WS_L_N == 0 && flags2 != 0 {
                    pos += 1;
                    flags2 = seg.flags(pos);
                }
                add(pos, &mut out);
                continue;
            }
            let mut n_ws = 0;
            while seg.flags(pos + n_ws) & unicode::WHITESPACE != 0 {
                n_ws += 1;
            }
            if n_ws > 1 && seg.cpt(pos + n_ws).is_some() {
                pos += n_ws - 1;
                add(pos, &mut out);
                continue;
            }
            if n_ws > 0 {
                pos += n_ws;
                add(pos, &mut out);
                continue;
            }
            pos += 1;
            add(pos, &mut out);
        }
    }
    out
}

/// llama.cpp's hand-written Llama-3 splitter:
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
pub(super) fn split_llama3(cpts: &[char], offsets: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(offsets.len());
    let mut start = 0;
    for &len in offsets {
        let seg = Segment {
            cpts,
            ini: start,
            end: start + len,
        };
        start += len;
        let mut prev_end = seg.ini;
        let mut add = |end: usize, out: &mut Vec<usize>| -> usize {
            let n = end - prev_end;
            if n > 0 {
                out.push(n);
            }
            prev_end = end;
            n
        };
        let lower = |c: Option<char>| c.map(|c| c.to_ascii_lowercase());
        let is_cr_lf = |c: Option<char>| matches!(c, Some('\r' | '\n'));
        let mut pos = seg.ini;
        while pos < seg.end {
            let cpt = seg.cpt(pos);
            let flags = seg.flags(pos);
            if cpt == Some('\'') && pos + 1 < seg.end {
                let next = lower(seg.cpt(pos + 1));
                if matches!(next, Some('s' | 't' | 'm' | 'd')) {
                    pos += add(pos + 2, &mut out);
                    continue;
                }
                if pos + 2 < seg.end {
                    let next2 = lower(seg.cpt(pos + 2));
                    if matches!(
                        (next, next2),
                        (Some('r'), Some('e')) | (Some('v'), Some('e')) | (Some('l'), Some('l'))
                    ) {
                        pos += add(pos + 3, &mut out);
                        continue;
                    }
                }
            }
            if !(is_cr_lf(cpt) || flags & NUMBER != 0)
                && (flags & LETTER != 0 || seg.flags(pos + 1) & LETTER != 0)
            {
                pos += 1;
                while seg.flags(pos) & LETTER != 0 {
                    pos += 1;
                }
                add(pos, &mut out);
                continue;
            }
            if flags & NUMBER != 0 {
                let mut ini = pos;
                while seg.flags(pos) & NUMBER != 0 {
                    pos += 1;
                    if pos - ini >= 3 {
                        add(pos, &mut out);
                        ini = pos;
                    }
                }
                add(pos, &mut out);
                continue;
            }
            let space = cpt == Some(' ');
            let mut flags2 = if space { seg.flags(pos + 1) } else { flags };
            if flags2 & NOT_WS_L_N == 0 && flags != 0 {
                pos += usize::from(space);
                while flags2 & NOT_WS_L_N == 0 && flags2 != 0 {
                    pos += 1;
                    flags2 = seg.flags(pos);
                }
                while is_cr_lf(seg.cpt(pos)) {
                    pos += 1;
                }
                add(pos, &mut out);
                continue;
            }
            let mut n_ws = 0;
            let mut last_cr_lf_end = 0;
            while seg.flags(pos + n_ws) & unicode::WHITESPACE != 0 {
                if is_cr_lf(seg.cpt(pos + n_ws)) {
                    last_cr_lf_end = pos + n_ws + 1;
                }
                n_ws += 1;
            }
            if last_cr_lf_end > 0 {
                pos = last_cr_lf_end;
                add(pos, &mut out);
                continue;
            }
            if n_ws > 1 && seg.cpt(pos + n_ws).is_some() {
                pos += n_ws - 1;
                add(pos, &mut out);
                continue;
            }
            if n_ws > 0 {
                pos += n_ws;
                add(pos, &mut out);
                continue;
            }
            pos += 1;
            add(pos, &mut out);
        }
    }
    out
}
