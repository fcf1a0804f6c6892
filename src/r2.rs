//! [`Blobs`] over the R2 bucket `SKILLS_BUCKET`: skills, readonly texts such as `soul.md`, and
//! spilled fields of oversize messages (under `_spill/`).

use std::collections::HashMap;

use worker::{Bucket, Include};

use session_agent_core::blobs::{Blob, BlobInfo, Blobs, BoxFuture};
use session_agent_core::error::{Error, ErrorKind, Result};

/// The bucket, or why there is none (the binding is missing).
pub(crate) struct R2Blobs {
    bucket: Option<Bucket>,
}

impl R2Blobs {
    pub(crate) fn new(bucket: Option<Bucket>) -> Self {
        R2Blobs { bucket }
    }

    fn bucket(&self) -> Result<&Bucket> {
        self.bucket.as_ref().ok_or_else(|| {
            Error::new(ErrorKind::NotConfigured, "the R2 binding SKILLS_BUCKET is missing (see wrangler.toml)")
        })
    }
}

fn r2_error(what: &str, key: &str, e: worker::Error) -> Error {
    Error::internal(format!("R2 {what} {key:?}: {e}"))
}

const DESCRIPTION: &str = "description";

impl Blobs for R2Blobs {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Blob>>> {
        Box::pin(async move {
            let Some(obj) = self.bucket()?.get(key).execute().await.map_err(|e| r2_error("get", key, e))? else {
                return Ok(None);
            };
            let description = obj.custom_metadata().ok().and_then(|m| m.get(DESCRIPTION).cloned());
            let text = match obj.body() {
                Some(body) => body.text().await.map_err(|e| r2_error("read", key, e))?,
                None => String::new(),
            };
            Ok(Some(Blob { text, description }))
        })
    }

    fn put<'a>(&'a self, key: &'a str, blob: Blob) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut meta = HashMap::new();
            if let Some(d) = blob.description {
                meta.insert(DESCRIPTION.to_owned(), d);
            }
            self.bucket()?
                .put(key, blob.text)
                .custom_metadata(meta)
                .execute()
                .await
                .map_err(|e| r2_error("put", key, e))?;
            Ok(())
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<BlobInfo>>> {
        Box::pin(async move {
            let bucket = self.bucket()?;
            let mut out = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut req = bucket.list().prefix(prefix).include(vec![Include::CustomMetadata]);
                if let Some(c) = cursor.take() {
                    req = req.cursor(c);
                }
                let page = req.execute().await.map_err(|e| r2_error("list", prefix, e))?;
                for o in page.objects() {
                    let description = o.custom_metadata().ok().and_then(|m| m.get(DESCRIPTION).cloned());
                    out.push(BlobInfo { key: o.key(), description });
                }
                match page.cursor().filter(|_| page.truncated()) {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            Ok(out)
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { self.bucket()?.delete(key).await.map_err(|e| r2_error("delete", key, e)) })
    }
}
