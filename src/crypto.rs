//! HMAC-SHA-256 through WebCrypto (`crypto.subtle`), for scoped tokens: sign when the front door
//! issues one, verify (in constant time, by the runtime) when one is presented. The imported key
//! is kept for the isolate's life, so a request pays for one `verify` only.

use std::cell::RefCell;

use worker::js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsValue};
use worker::wasm_bindgen_futures::JsFuture;

use session_agent_core::error::{Error, Result};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = ["crypto", "subtle"], js_name = importKey, catch)]
    fn import_key(
        format: &str,
        key: &Uint8Array,
        algorithm: &Object,
        extractable: bool,
        usages: &Array,
    ) -> std::result::Result<Promise, JsValue>;
    #[wasm_bindgen(js_namespace = ["crypto", "subtle"], js_name = sign, catch)]
    fn subtle_sign(algorithm: &str, key: &JsValue, data: &Uint8Array) -> std::result::Result<Promise, JsValue>;
    #[wasm_bindgen(js_namespace = ["crypto", "subtle"], js_name = verify, catch)]
    fn subtle_verify(
        algorithm: &str,
        key: &JsValue,
        signature: &Uint8Array,
        data: &Uint8Array,
    ) -> std::result::Result<Promise, JsValue>;
}

thread_local! {
    /// The key last imported and the secret it was made from (a new secret imports anew).
    static KEY: RefCell<Option<(String, JsValue)>> = const { RefCell::new(None) };
}

fn failed(what: &str, e: JsValue) -> Error {
    Error::internal(format!("WebCrypto {what}: {}", e.as_string().unwrap_or_else(|| format!("{e:?}"))))
}

async fn key(secret: &str) -> Result<JsValue> {
    if let Some(k) = KEY.with(|k| k.borrow().as_ref().filter(|(s, _)| s == secret).map(|(_, k)| k.clone())) {
        return Ok(k);
    }
    let algorithm = Object::new();
    let set = |k: &str, v: &str| Reflect::set(&algorithm, &k.into(), &v.into());
    set("name", "HMAC").and_then(|_| set("hash", "SHA-256")).map_err(|e| failed("key", e))?;
    let usages = Array::of2(&"sign".into(), &"verify".into());
    let bytes = Uint8Array::from(secret.as_bytes());
    let promise = import_key("raw", &bytes, &algorithm, false, &usages).map_err(|e| failed("importKey", e))?;
    let key = JsFuture::from(promise).await.map_err(|e| failed("importKey", e))?;
    KEY.with(|k| *k.borrow_mut() = Some((secret.to_owned(), key.clone())));
    Ok(key)
}

/// The HMAC-SHA-256 of `data` under `secret`.
pub(crate) async fn sign(secret: &str, data: &str) -> Result<Vec<u8>> {
    let key = key(secret).await?;
    let promise = subtle_sign("HMAC", &key, &Uint8Array::from(data.as_bytes())).map_err(|e| failed("sign", e))?;
    let signature = JsFuture::from(promise).await.map_err(|e| failed("sign", e))?;
    Ok(Uint8Array::new(&signature).to_vec())
}

/// Whether `signature` is the HMAC-SHA-256 of `data` under `secret` (compared by the runtime in
/// constant time).
pub(crate) async fn verify(secret: &str, data: &str, signature: &[u8]) -> Result<bool> {
    let key = key(secret).await?;
    let promise = subtle_verify("HMAC", &key, &Uint8Array::from(signature), &Uint8Array::from(data.as_bytes()))
        .map_err(|e| failed("verify", e))?;
    let ok = JsFuture::from(promise).await.map_err(|e| failed("verify", e))?;
    Ok(ok.as_bool() == Some(true))
}
