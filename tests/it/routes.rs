//! The route table (`session_agent_api::routes::ROUTES`) against the contract as
//! `docs/openapi.yaml` writes it: the same paths, each with the same methods, each method with
//! the same query parameters. The spec's paths are the front door's (`/agents/{agent}/…`); the
//! table's are the Durable Object's, without that prefix. The front door answers three paths
//! itself (`/healthz`, the console at `/`, `POST /agents/{agent}/tokens`): they are not the
//! Durable Object's; nor is the `token` query parameter of a WebSocket handshake, which it takes
//! off.
//!
//! A family of query parameter names (`metadata.<key>`: `metadata.user`, `metadata.plan`, …) is
//! no parameter OpenAPI can declare: an operation lists it under `x-query-families`, and the
//! table under the same name (`http::Query::family` reads it).

use std::collections::{BTreeMap, BTreeSet};

use session_agent_api::routes::{Route, ROUTES, SPACE_ROUTES};
use yaml_rust2::{Yaml, YamlLoader};

/// The operations of the spec under `prefix` (`/agents/{agent}`, `/spaces/{space}`): DO path →
/// method → its query parameters.
fn spec(prefix: &str) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.yaml")).unwrap();
    let doc = &YamlLoader::load_from_str(&text).unwrap()[0];
    let components = &doc["components"]["parameters"];
    // A parameter, its `$ref` followed.
    let resolve = |p: &Yaml| -> Yaml {
        match p["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/parameters/")) {
            Some(name) => components[name].clone(),
            None => p.clone(),
        }
    };
    let queries = |list: &Yaml| -> BTreeSet<String> {
        list.as_vec()
            .into_iter()
            .flatten()
            .map(resolve)
            .filter(|p| p["in"].as_str() == Some("query"))
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut out = BTreeMap::new();
    for (path, item) in doc["paths"].as_hash().unwrap() {
        let path = path.as_str().unwrap();
        let Some(rest) = path.strip_prefix(prefix) else { continue };
        if rest == "/tokens" {
            continue; // the front door's
        }
        let rest = if rest.is_empty() { "/" } else { rest };
        let shared = queries(&item["parameters"]);
        let mut methods = BTreeMap::new();
        for (m, op) in item.as_hash().unwrap() {
            let m = m.as_str().unwrap();
            if ["get", "post", "put", "patch", "delete"].contains(&m) {
                let mut q = shared.clone();
                q.extend(queries(&op["parameters"]));
                let families = op["x-query-families"].as_vec().into_iter().flatten();
                q.extend(families.map(|f| f["name"].as_str().unwrap().to_owned()));
                // The front door takes a WebSocket handshake's `?token=` off before the Durable
                // Object sees the request.
                q.remove("token");
                methods.insert(m.to_uppercase(), q);
            }
        }
        out.insert(rest.to_owned(), methods);
    }
    out
}

#[test]
fn the_route_table_is_the_contract() {
    same(ROUTES, "/agents/{agent}");
}

/// A memory space's table against the spec's `/spaces/{space}/…`: the same, but for the `/link/…`
/// routes, which only its agents' Durable Objects call (the front door refuses them).
#[test]
fn the_space_route_table_is_the_contract() {
    let public: Vec<Route> = SPACE_ROUTES
        .iter()
        .filter(|r| !r.path.starts_with("/link/"))
        .map(|r| Route { path: r.path, who: r.who, names: r.names, writes: r.writes, ops: r.ops })
        .collect();
    assert!(public.len() < SPACE_ROUTES.len());
    same(&public, "/spaces/{space}");
}

fn same(routes: &[Route], prefix: &str) {
    let spec = spec(prefix);
    let table: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = routes
        .iter()
        .map(|r| {
            let ops = r
                .ops
                .iter()
                .map(|o| (o.method.as_str().to_owned(), o.query.iter().map(|q| q.to_string()).collect()))
                .collect();
            (r.path.to_owned(), ops)
        })
        .collect();
    assert!(table.len() > 5 && spec.len() > 5, "{} routes, {} spec paths", table.len(), spec.len());
    let paths = |m: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>| m.keys().cloned().collect::<BTreeSet<_>>();
    assert_eq!(paths(&table), paths(&spec), "the table's paths and the spec's");
    for (path, ops) in &table {
        let methods = |m: &BTreeMap<String, BTreeSet<String>>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(methods(ops), methods(&spec[path]), "{path}: the methods");
        for (method, query) in ops {
            assert_eq!(query, &spec[path][method], "{method} {path}: the query parameters");
        }
    }
}

#[test]
fn every_route_is_reached_and_names_its_template() {
    for r in ROUTES {
        let concrete: String =
            r.path.split('/').map(|seg| if seg.starts_with('{') { "x" } else { seg }).collect::<Vec<_>>().join("/");
        let concrete = if concrete.is_empty() { "/".to_owned() } else { concrete };
        assert_eq!(session_agent_api::route_template(&concrete), Some(r.path), "{concrete}");
    }
}

#[test]
fn a_family_of_query_names_ends_in_key_and_is_read_as_one() {
    for r in ROUTES {
        for o in r.ops {
            for q in o.query {
                if q.contains('<') {
                    assert!(q.ends_with(".<key>"), "{} {}: {q}", o.method.as_str(), r.path);
                }
            }
        }
    }
}
