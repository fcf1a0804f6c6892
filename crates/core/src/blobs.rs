//! The object store (R2 in the Durable Object): skills and readonly texts such as `soul.md` that context blocks read
//! and write, and the spilled fields of oversize messages. Async, because R2 is; object safe, so the core takes a `&dyn
//! Blobs`. [`MemBlobs`] keeps objects in memory for native tests and embedders.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use crate::error::Result;

/// A boxed future that need not be `Send` (Workers are single threaded).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// One stored text object.
#[derive(Clone, Debug, PartialEq)]
pub struct Blob {
    pub text: String,
    /// `customMetadata.description` in R2.
    pub description: Option<String>,
}

/// A listed object: its full key and description.
#[derive(Clone, Debug, PartialEq)]
pub struct BlobInfo {
    pub key: String,
    pub description: Option<String>,
}

/// Text objects by key.
pub trait Blobs {
    /// The object at `key`, or `None`.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Blob>>>;
    /// Writes (creates or replaces) the object at `key`.
    fn put<'a>(&'a self, key: &'a str, blob: Blob) -> BoxFuture<'a, Result<()>>;
    /// Every object whose key starts with `prefix`, in key order, with descriptions.
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<BlobInfo>>>;
    /// Deletes the object at `key` (nothing happens when there is none).
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// [`Blobs`] in memory.
#[derive(Default)]
pub struct MemBlobs {
    objects: RefCell<BTreeMap<String, Blob>>,
}

impl MemBlobs {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Blobs for MemBlobs {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Blob>>> {
        let found = self.objects.borrow().get(key).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn put<'a>(&'a self, key: &'a str, blob: Blob) -> BoxFuture<'a, Result<()>> {
        self.objects.borrow_mut().insert(key.to_owned(), blob);
        Box::pin(async { Ok(()) })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<BlobInfo>>> {
        let found = self
            .objects
            .borrow()
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, b)| BlobInfo { key: k.clone(), description: b.description.clone() })
            .collect();
        Box::pin(async move { Ok(found) })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<()>> {
        self.objects.borrow_mut().remove(key);
        Box::pin(async { Ok(()) })
    }
}

impl MemBlobs {
    /// Every key stored, in order (for tests).
    pub fn keys(&self) -> Vec<String> {
        self.objects.borrow().keys().cloned().collect()
    }
}
