//! `suffix` on `/v1/completions`: with a model that has fill-in-the-middle tokens (stories260K
//! rewritten with FIM ids in its metadata), the prompt is laid out as llama-server's `/infill`
//! does, `[BOS] FIM_PRE prefix FIM_SUF suffix FIM_MID`, which the cache then proves token for
//! token (the same ids sent as a plain prompt reuse all but the last); without FIM tokens, or
//! with `echo`, `suffix` is a 400 naming the field.

use memoria_model::gguf::{GgufFile, MetaValue};
use memoria_model::tokenizer::Tokenizer;
use serde_json::json;

use super::client::post;
use super::server::{Server, model, temp_dir};
use crate::shared;

const FIM: (u32, u32, u32) = (3, 4, 5);

fn fim_model() -> std::path::PathBuf {
    let f = GgufFile::open(shared::path("models/stories260K-f32.gguf")).expect("stories");
    let mut w = crate::gguf::rewrite(&f);
    for (key, id) in [
        ("tokenizer.ggml.fim_pre_token_id", FIM.0),
        ("tokenizer.ggml.fim_suf_token_id", FIM.1),
        ("tokenizer.ggml.fim_mid_token_id", FIM.2),
    ] {
        w.set(key, MetaValue::U32(id));
    }
    let path = temp_dir("infill").join("stories-fim.gguf");
    w.write_to(&path).expect("write the FIM model");
    path
}

#[test]
fn serve_suffix_lays_out_an_infill_prompt_or_names_the_field() {
    let path = fim_model();
    let tok = Tokenizer::from_gguf(&GgufFile::open(&path).expect("open")).expect("tokenizer");
    let (prefix, suffix) = (
        "Once upon a time",
        "and they lived happily ever after with the little dog and the big red ball in the park",
    );
    let mut expected = vec![tok.bos().expect("bos"), FIM.0];
    expected.extend(tok.encode(prefix, false, false));
    expected.push(FIM.1);
    expected.extend(tok.encode(suffix, false, false));
    expected.push(FIM.2);
    assert!(expected.len() > 24, "long enough to span blocks");

    let s = Server::start("infill", &["-m", path.to_str().expect("utf-8")]);
    let body = json!({"prompt": prefix, "suffix": suffix, "max_tokens": 4, "temperature": 0});
    let r = post(s.addr, "/v1/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        v["usage"]["prompt_tokens"].as_u64(),
        Some(expected.len() as u64),
        "{v}"
    );
    assert!(v["choices"][0]["text"].is_string(), "{v}");

    // The same ids as a plain prompt: every token but the last comes from the cache.
    let plain = json!({"prompt": expected, "max_tokens": 1});
    let r = post(s.addr, "/v1/completions", &plain, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let cached = r.json()["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64();
    assert_eq!(cached, Some(expected.len() as u64 - 1), "{}", r.text());

    let both = json!({"prompt": prefix, "suffix": suffix, "echo": true});
    let r = post(s.addr, "/v1/completions", &both, &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["param"], "echo", "{}", r.text());

    // A model without FIM tokens names the field.
    let plain_model = Server::start("infill-none", &["-m", &model()]);
    let r = post(plain_model.addr, "/v1/completions", &body, &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    let e = &r.json()["error"];
    assert_eq!(e["param"], "suffix", "{e}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("fill-in-the-middle")),
        "{e}"
    );
}
