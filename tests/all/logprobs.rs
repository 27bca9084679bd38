//! The fidelity tools end to end on stories260K: `memoria logprobs` (shapes, JSON, ranking, its
//! top-1 equal to the greedy tokens of `memoria run` and of llama.cpp) and `memoria perplexity`
//! (llama-perplexity's chunking checked against per-token log-probabilities from `logprobs`,
//! finite, and the same whatever the batch size).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::shared;

/// A short story in stories260K's register, long enough for several 64-token chunks.
const STORY: &str = "Once upon a time, there was a little girl named Lily. She loved to play outside \
in the park with her friends. One day, she saw a big red ball under a tree. She wanted to play with \
it, but it was too high. Lily asked her mom for help. Her mom smiled and said, \"Let's get it \
together.\" They got the ball and played all day. Lily was very happy. The sun was warm and the sky \
was blue. Lily and her mom went home and ate a big cake. Then Lily went to bed and had a good dream. \
The next day, Lily went to the park again. She met a boy named Tom. Tom had a small dog. The dog was \
very funny and liked to run. Lily and Tom played with the dog and the ball. They laughed and ran \
around the tree. When it was time to go home, Lily said, \"Thank you, Tom. I had fun today.\" Tom \
said, \"Me too, Lily. Let's play again tomorrow.\" Lily went home and told her mom about her new \
friend. Her mom was happy too. They ate dinner and Lily went to sleep with a big smile.";

fn memoria(args: &[&str]) -> Output {
    crate::bin::command()
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn memoria")
}

fn ok_json(args: &[&str]) -> Value {
    let out = memoria(args);
    assert!(
        out.status.success(),
        "memoria {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 stdout");
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn model() -> PathBuf {
    shared::path("models/stories260K-f32.gguf")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("id"))
        .collect()
}

/// `top_logprobs` as `[position][rank] = (id, logprob)`.
fn top(v: &Value) -> Vec<Vec<(u64, f64)>> {
    v["top_logprobs"]
        .as_array()
        .expect("top_logprobs")
        .iter()
        .map(|pos| {
            pos.as_array()
                .expect("candidates")
                .iter()
                .map(|c| (c[0].as_u64().expect("id"), c[1].as_f64().expect("logprob")))
                .collect()
        })
        .collect()
}

fn join(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

#[test]
fn logprobs_top1_follows_greedy_run_and_llama_cpp() {
    let m = model();
    let run = ok_json(&[
        "run",
        "-m",
        s(&m),
        "-p",
        "Once upon a time",
        "-n",
        "40",
        "--temp",
        "0",
        "-t",
        "2",
        "--json",
    ]);
    let prompt = ids(&run["prompt_tokens"]);
    let generated = ids(&run["tokens"]);
    assert_eq!(generated.len(), 40);
    let seq: Vec<u64> = prompt.iter().chain(&generated).copied().collect();
    let v = ok_json(&[
        "logprobs",
        "-m",
        s(&m),
        "--ids",
        &join(&seq),
        "--json",
        "-t",
        "2",
    ]);
    assert_eq!(ids(&v["ids"]), seq);
    let t = top(&v);
    assert_eq!(t.len(), seq.len());
    for (i, cands) in t.iter().enumerate() {
        assert_eq!(cands.len(), 5, "position {i}");
        assert!(cands.windows(2).all(|w| w[0].1 >= w[1].1), "{i}: {cands:?}");
        assert!(
            cands
                .iter()
                .all(|c| c.1 <= 0.0 && c.1.is_finite() && c.0 < 512)
        );
    }
    for (j, &g) in generated.iter().enumerate() {
        assert_eq!(t[prompt.len() - 1 + j][0].0, g, "generated token {j}");
    }

    // Text input is tokenized as `run` tokenizes it.
    let v = ok_json(&[
        "logprobs",
        "-m",
        s(&m),
        "-p",
        "Once upon a time",
        "--json",
        "--top",
        "3",
    ]);
    assert_eq!(ids(&v["ids"]), prompt);
    assert!(top(&v).iter().all(|c| c.len() == 3));

    // llama.cpp's greedy continuation of its golden prompt, forced: the same top-1 throughout.
    let golden = shared::json("golden/greedy-f32.json");
    let case = &golden["greedy"]["results"][0];
    let (p, g) = (ids(&case["prompt_ids"]), ids(&case["generated_ids"]));
    let seq: Vec<u64> = p.iter().chain(&g).copied().collect();
    let v = ok_json(&[
        "logprobs",
        "-m",
        s(&m),
        "--ids",
        &join(&seq),
        "--json",
        "-b",
        "7",
        "--cache-type",
        "f32",
    ]);
    let t = top(&v);
    for (j, &want) in g.iter().enumerate() {
        assert_eq!(t[p.len() - 1 + j][0].0, want, "llama.cpp token {j}");
    }
}

#[test]
fn logprobs_prints_a_table_and_refuses_bad_input() {
    let m = model();
    let out = memoria(&["logprobs", "-m", s(&m), "-p", "Once upon", "--top", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let rows = text.lines().skip(1).count();
    let n = ids(&ok_json(&["logprobs", "-m", s(&m), "-p", "Once upon", "--json"])["ids"]).len();
    assert_eq!(rows, n, "{text}");
    assert!(
        text.contains("\"Once\"") || text.contains("\" Once\""),
        "{text}"
    );
    for (args, why) in [
        (vec!["--ids", "1,99999"], "not in the vocabulary"),
        (vec!["--ids", "1,x"], "invalid"),
        (vec!["-p", "hi", "--top", "0"], "out of range"),
        (
            vec!["-p", "hi", "--cache-type", "q8_0"],
            "unknown cache type",
        ),
    ] {
        let mut a = vec!["logprobs", "-m", s(&m)];
        a.extend(args);
        let out = memoria(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{a:?}");
        assert!(err.contains(why), "{a:?}: {err}");
    }
}

/// Writes the story to a temp file.
fn story_file() -> PathBuf {
    let path = std::env::temp_dir().join(format!("memoria-ppl-story-{}.txt", std::process::id()));
    std::fs::write(&path, STORY).expect("write story");
    path
}

#[test]
fn perplexity_scores_second_halves_of_chunks_like_llama_perplexity() {
    let (m, f) = (model(), story_file());
    let ctx = 64usize;
    let v = ok_json(&[
        "perplexity",
        "-m",
        s(&m),
        "-f",
        s(&f),
        "-c",
        "64",
        "--json",
        "-t",
        "2",
    ]);
    let ppl = v["ppl"].as_f64().expect("ppl");
    let chunks = v["chunks"].as_u64().expect("chunks") as usize;
    assert!(ppl.is_finite() && ppl > 1.0, "{v}");
    assert!(v["ppl_stderr"].as_f64().expect("stderr") > 0.0, "{v}");

    // The same number from per-token log-probabilities: tokens with BOS (special text not
    // parsed), chunks of 64 whose first token becomes BOS, positions 32..=62 scoring the next.
    let tokens: Vec<u64> = serde_json::from_str(
        String::from_utf8(
            memoria(&[
                "tokenize",
                "-m",
                s(&m),
                "--json",
                "--no-parse-special",
                STORY,
            ])
            .stdout,
        )
        .expect("utf-8")
        .trim(),
    )
    .expect("token ids");
    assert_eq!(chunks, tokens.len() / ctx);
    assert!(chunks >= 3, "the story is {} tokens", tokens.len());
    let mut nll = 0.0;
    let mut count = 0;
    for c in tokens.chunks_exact(ctx) {
        let mut chunk = c.to_vec();
        chunk[0] = tokens[0];
        let lp = ok_json(&[
            "logprobs",
            "-m",
            s(&m),
            "--ids",
            &join(&chunk),
            "--top",
            "512",
            "--json",
        ]);
        let t = top(&lp);
        for pos in ctx / 2..ctx - 1 {
            let next = chunk[pos + 1];
            let (_, l) = t[pos]
                .iter()
                .find(|c| c.0 == next)
                .expect("every id ranked");
            nll -= l;
            count += 1;
        }
    }
    assert_eq!(v["tokens_scored"].as_u64(), Some(count as u64));
    let want = (nll / count as f64).exp();
    assert!((ppl - want).abs() <= 1e-9 * want, "{ppl} vs {want}");
}

#[test]
fn perplexity_is_the_same_for_every_batch_size_and_prints_progress() {
    let (m, f) = (model(), story_file());
    let run = |b: &str| {
        let out = memoria(&["perplexity", "-m", s(&m), "-f", s(&f), "-c", "64", "-b", b]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "-b {b}: {err}");
        (String::from_utf8(out.stdout).expect("utf-8"), err)
    };
    let (base, err) = run("2048");
    assert!(base.starts_with("Final estimate: PPL = "), "{base}");
    assert!(
        err.contains("calculating perplexity over") && err.contains("n_seq=32"),
        "{err}"
    );
    assert!(err.contains("[1]") && err.contains(",[2]"), "{err}");
    assert!(err.contains("seconds per pass - ETA"), "{err}");
    for b in ["16", "64", "100"] {
        let (out, _) = run(b);
        assert_eq!(out, base, "-b {b}");
    }
    let out = memoria(&["perplexity", "-m", s(&m), "-f", s(&f), "-c", "4096"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("you need at least 8192 tokens"), "{err}");
}
