//! Server-sent events (`text/event-stream`), decoded from a body that arrives in arbitrary
//! pieces: the format every streaming provider answers in.

/// One server-sent event: its `event:` name, if any, and its `data:` lines joined with `\n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// Decodes a `text/event-stream` body handed over in arbitrary pieces (an event, a line, even a
/// `\r\n` may be split across them). Lines end in `\n`, `\r\n` or `\r`; `:` lines are comments;
/// a blank line dispatches the event, if it has data.
#[derive(Clone, Debug, Default)]
pub struct SseDecoder {
    line: String,
    event: Option<String>,
    data: Option<String>,
    /// The last piece ended in `\r`: a `\n` starting the next one belongs to that line end.
    skip_lf: bool,
    started: bool,
}

impl SseDecoder {
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// Feeds the next piece of the body; returns the events it completes.
    pub fn push(&mut self, chunk: &str) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut chunk = chunk;
        if !self.started && !chunk.is_empty() {
            self.started = true;
            chunk = chunk.strip_prefix('\u{feff}').unwrap_or(chunk);
        }
        let bytes = chunk.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if b != b'\r' && b != b'\n' {
                continue;
            }
            if b == b'\n' && i == start && self.skip_lf && self.line.is_empty() {
                // The `\n` of a `\r\n` split across pieces.
                self.skip_lf = false;
                start = i + 1;
                continue;
            }
            if b == b'\n' && i > 0 && bytes[i - 1] == b'\r' && i == start {
                // The `\n` of a `\r\n` within this piece: the line already ended at `\r`.
                start = i + 1;
                continue;
            }
            self.line.push_str(&chunk[start..i]);
            self.skip_lf = false;
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut out);
            start = i + 1;
        }
        if let Some(&b) = bytes.last() {
            self.skip_lf = b == b'\r';
        }
        self.line.push_str(&chunk[start..]);
        out
    }

    /// The bytes read but not yet given out: the line being read and the event's data so far.
    pub fn pending_bytes(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, String::len)
    }

    /// The end of the body: dispatches a last event not followed by a blank line.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut out);
        }
        self.dispatch(&mut out);
        self.skip_lf = false;
        out
    }

    fn process_line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take().filter(|e| !e.is_empty());
        if let Some(data) = self.data.take() {
            out.push(SseEvent { event, data });
        }
    }
}
