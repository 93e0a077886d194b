//! The page session's memory of pasted content: one upload per picture, however often it is pasted.

use std::collections::VecDeque;

/// A SHA-256 digest of pasted content.
pub type ContentHash = [u8; 32];

/// What the memory knows about a hash, answered before anything is asked of the relay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recall {
    /// Never seen in this page session: ask the relay, then upload what it lacks.
    New,
    /// An upload of the same content is under way: wait for it and type its path.
    InProgress,
    /// Already on the relay at this path: type it, send nothing.
    Uploaded(String),
}

/// Remembers up to `capacity` recently pasted hashes and where the relay put them.
///
/// Ten pastes of one screenshot make one upload: the first [`begin`](Self::begin) says
/// [`Recall::New`] and marks the hash in progress, the others get `InProgress` and then, after
/// [`finish`](Self::finish), `Uploaded(path)`. The least recently used entry is forgotten first;
/// forgetting costs one question to the relay, which still has the file and answers "all of it".
#[derive(Clone, Debug)]
pub struct RecentUploads {
    capacity: usize,
    /// Most recently used last. `None` while the upload runs. A linear scan: `capacity` is tens.
    entries: VecDeque<(ContentHash, Option<String>)>,
}

impl RecentUploads {
    /// A memory of at most `capacity` hashes (at least one).
    pub fn new(capacity: usize) -> Self {
        RecentUploads { capacity: capacity.max(1), entries: VecDeque::new() }
    }

    /// What is known of `hash`, without changing anything.
    pub fn recall(&self, hash: &ContentHash) -> Recall {
        match self.entries.iter().find(|(h, _)| h == hash) {
            None => Recall::New,
            Some((_, None)) => Recall::InProgress,
            Some((_, Some(path))) => Recall::Uploaded(path.clone()),
        }
    }

    /// A paste of `hash`: answers as [`recall`](Self::recall) and, when it is new, marks it in
    /// progress so a second paste does not start a second upload.
    pub fn begin(&mut self, hash: ContentHash) -> Recall {
        let recall = self.recall(&hash);
        match recall {
            Recall::New => self.put(hash, None),
            _ => self.touch(&hash),
        }
        recall
    }

    /// The upload of `hash` landed at `path` (also for a paste the relay already had in full).
    pub fn finish(&mut self, hash: ContentHash, path: impl Into<String>) {
        self.put(hash, Some(path.into()));
    }

    /// The upload of `hash` failed or was cancelled: the next paste starts over (and resumes).
    pub fn abandon(&mut self, hash: &ContentHash) {
        self.entries.retain(|(h, p)| h != hash || p.is_some());
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn touch(&mut self, hash: &ContentHash) {
        if let Some(i) = self.entries.iter().position(|(h, _)| h == hash) {
            let entry = self.entries.remove(i);
            self.entries.extend(entry);
        }
    }

    fn put(&mut self, hash: ContentHash, path: Option<String>) {
        self.entries.retain(|(h, _)| *h != hash);
        self.entries.push_back((hash, path));
        while self.entries.len() > self.capacity {
            self.entries.pop_front();
        }
    }
}
