use serde_json::json;

use super::*;

fn eval(text: &str, variables: Value) -> Result<Value, CelError> {
    let value = parse(text)?.evaluate(|name| variables.get(name))?;
    Ok(value.expect("a value, not omit()"))
}

/// The message of the evaluation error `text` gives over `schema()`.
fn failure(text: &str) -> String {
    match eval(text, schema()) {
        Err(CelError::Evaluate { message, .. }) => message,
        other => panic!("{text}: an evaluation error, got {other:?}"),
    }
}

/// Each text evaluates to its value over `schema()`.
fn assert_cases(cases: &[(&str, Value)]) {
    for (text, want) in cases {
        assert_eq!(eval(text, schema()).as_ref(), Ok(want), "{text}");
    }
}

fn schema() -> Value {
    json!({"schema": {"spec": {"name": "web", "replicas": 3, "tags": ["a", "b"], "env": {"mode": "prod"}}}})
}

#[test]
fn a_lone_expression_keeps_its_type() {
    assert_eq!(eval("${schema.spec.replicas}", schema()), Ok(json!(3)));
    assert_eq!(eval("${schema.spec.tags}", schema()), Ok(json!(["a", "b"])));
    assert_eq!(eval("${schema.spec.replicas > 2}", schema()), Ok(json!(true)));
}

#[test]
fn expressions_within_text_are_joined_as_strings() {
    assert_eq!(
        eval("${schema.spec.name}-${schema.spec.replicas}.svc", schema()),
        Ok(json!("web-3.svc"))
    );
    assert_eq!(eval("no expression", schema()), Ok(json!("no expression")));
}

#[test]
fn braces_and_quotes_inside_an_expression_do_not_end_it() {
    assert_eq!(eval("${{'a': '}'}['a']}", schema()), Ok(json!("}")));
    assert_eq!(eval("${\"x\" + '}'}", schema()), Ok(json!("x}")));
}

#[test]
fn the_functions_kro_examples_use_are_there() {
    let cases = [
        ("${has(schema.spec.env.mode)}", json!(true)),
        ("${has(schema.spec.missing)}", json!(false)),
        ("${schema.spec.?missing.orValue('none')}", json!("none")),
        ("${schema.spec.name.split('e')}", json!(["w", "b"])),
        ("${schema.spec.tags.join(',')}", json!("a,b")),
        ("${string(schema.spec.replicas)}", json!("3")),
        ("${schema.spec.tags.exists(t, t == 'b')}", json!(true)),
        ("${schema.spec.tags.all(t, size(t) == 1)}", json!(true)),
        ("${schema.spec.tags.map(t, t + t)}", json!(["aa", "bb"])),
        ("${schema.spec.tags.filter(t, t != 'a')}", json!(["b"])),
        ("${size(schema.spec.tags)}", json!(2)),
        ("${'WeB'.lowerAscii()}", json!("web")),
        ("${schema.spec.name.matches('^w')}", json!(true)),
        ("${schema.spec.name.substring(1)}", json!("eb")),
        ("${base64.encode(b'web')}", json!("d2Vi")),
    ];
    assert_cases(&cases);
}

#[test]
fn kros_hashes_give_what_go_gives() {
    let cases = [
        (
            "${base64.encode(hash.sha256('web'))}",
            json!("S15X9usvQrkDmz0eE5KSlfIxdJxRDL40HNaANtmvl+I="),
        ),
        ("${base64.encode(hash.md5('web'))}", json!("JWel7JcF63rCyYQDPgYYnQ==")),
        ("${base64.encode(hash.fnv64a('web'))}", json!("XqDhGUhyHvE=")),
    ];
    assert_cases(&cases);
}

/// Each value is the one kro v0.9.4 gives for the same expression over the same
/// `schema`, computed with kro's own CEL environment.
#[test]
fn kros_seeded_random_values_are_kros() {
    let cases = [
        ("${random.seededString(10, 'web')}", json!("m5u18wmmm5")),
        (
            "${random.seededString(20, schema.spec.name)}",
            json!("m5u18wmmm5u18wmmm5u1"),
        ),
        ("${random.seededString(1, '')}", json!("e")),
        ("${random.seededInt(30000, 32768, 'web')}", json!(30921)),
        ("${random.seededInt(-5, 5, 'abc')}", json!(-1)),
        (
            "${random.seededInt(0, 9223372036854775807, 'x')}",
            json!(3274422879871479876_i64),
        ),
    ];
    assert_cases(&cases);
    assert!(failure("${random.seededString(0, 'web')}").contains("length must be positive"));
    assert!(failure("${random.seededInt(5, 5, 'web')}").contains("min must be less than max"));
}

#[test]
fn kros_json_functions_write_and_read_as_go_does() {
    let cases = [
        (
            r#"${json.marshal({'b': 1, 'a': [true, null, 'x<y&z'], 'c': 1.5, 'd': 1e21, 'e': 0.0000001, 'f': 2.0})}"#,
            json!(r#"{"a":[true,null,"x\u003cy\u0026z"],"b":1,"c":1.5,"d":1e+21,"e":1e-7,"f":2}"#),
        ),
        (
            "${json.marshal(schema.spec)}",
            json!(r#"{"env":{"mode":"prod"},"name":"web","replicas":3,"tags":["a","b"]}"#),
        ),
        ("${json.marshal(b'hi')}", json!(r#""aGk=""#)),
        (
            r#"${json.marshal('tab\tnl\nq"bs\\ \u0001 \u2028 \b \f')}"#,
            json!(r#""tab\tnl\nq\"bs\\ \u0001 \u2028 \b \f""#),
        ),
        (
            r#"${json.unmarshal('{"a": 1, "b": [1.5, "x"]}')}"#,
            json!({"a": 1, "b": [1.5, "x"]}),
        ),
        (r#"${json.unmarshal('{"a": 1}').a == 1}"#, json!(true)),
        (r#"${string(json.unmarshal('{"a": 1}').a)}"#, json!("1")),
        ("${2.0}", json!(2)),
    ];
    assert_cases(&cases);
    assert!(failure("${json.unmarshal('nope')}").contains("failed to parse JSON"));
}

#[test]
fn kros_map_and_list_functions_copy_as_kros_do() {
    let cases = [
        (
            "${{'a': 1, 'b': 2}.merge({'b': 3, 'c': 4})}",
            json!({"a": 1, "b": 3, "c": 4}),
        ),
        (
            "${{'a': {'x': 1, 'y': 2}, 'b': 1}.deepMerge({'a': {'y': 3}, 'c': 2})}",
            json!({"a": {"x": 1, "y": 3}, "b": 1, "c": 2}),
        ),
        ("${{'a': {'x': 1}}.deepMerge({'a': 5})}", json!({"a": 5})),
        ("${lists.setAtIndex([1, 2, 3], 1, 9)}", json!([1, 9, 3])),
        ("${lists.insertAtIndex([1, 2, 3], 3, 9)}", json!([1, 2, 3, 9])),
        ("${lists.insertAtIndex([1, 2], 0, 9)}", json!([9, 1, 2])),
        ("${lists.removeAtIndex([1, 2, 3], 0)}", json!([2, 3])),
        ("${[1, 2, 3].sortBy(x, -x)}", json!([3, 2, 1])),
        ("${lists.range(3)}", json!([0, 1, 2])),
        ("${[1, 2, 3, 4].slice(1, 3)}", json!([2, 3])),
    ];
    assert_cases(&cases);
    for (text, bounds) in [
        ("${lists.setAtIndex([1, 2, 3], 3, 9)}", "index 3 out of bounds [0, 3)"),
        ("${lists.removeAtIndex([1], -1)}", "index -1 out of bounds [0, 1)"),
        ("${lists.insertAtIndex([1, 2], 3, 9)}", "index 3 out of bounds [0, 2]"),
    ] {
        assert!(failure(text).contains(bounds), "{text}: {}", failure(text));
    }
}

/// Each value is the one kro v0.9.4 gives, through the Kubernetes libraries it uses.
#[test]
fn quantities_and_regexes_are_kubernetes() {
    let cases = [
        (
            r#"${quantity("500Mi").isLessThan(quantity("1Gi")) ? "small" : "large"}"#,
            json!("small"),
        ),
        ("${quantity('200M').compareTo(quantity('0.2G'))}", json!(0)),
        ("${quantity('50M').compareTo(quantity('50Mi'))}", json!(-1)),
        ("${quantity('50Mi').isGreaterThan(quantity('100Mi'))}", json!(false)),
        (
            "${quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')}",
            json!(true),
        ),
        ("${quantity('100m').isInteger()}", json!(false)),
        ("${quantity('100m').asApproximateFloat()}", json!(0.1)),
        ("${quantity('1e3').asInteger()}", json!(1000)),
        ("${quantity('1E').asInteger()}", json!(1_000_000_000_000_000_000_i64)),
        ("${quantity('1e+3').asInteger()}", json!(1000)),
        ("${quantity('.5').asApproximateFloat()}", json!(0.5)),
        ("${quantity('0.5Ki').asApproximateFloat()}", json!(512)),
        ("${quantity('Mi').asInteger()}", json!(0)),
        (
            "${[isQuantity('1.3G'), isQuantity('+5n'), isQuantity('5.'), isQuantity('-')]}",
            json!([true, true, true, true]),
        ),
        (
            "${[isQuantity('200K'), isQuantity('1,3G'), isQuantity(''), isQuantity('1e'), isQuantity('1..2'), isQuantity('+-1')]}",
            json!([false, false, false, false, false, false]),
        ),
        ("${'abc 123 def 456'.find('[0-9]+')}", json!("123")),
        ("${'abc'.find('[0-9]+')}", json!("")),
        ("${'abc 123 def 456'.findAll('[0-9]+')}", json!(["123", "456"])),
        ("${'a1b2c3'.findAll('[0-9]', 2)}", json!(["1", "2"])),
        ("${'a1b2c3'.findAll('[0-9]', 0)}", json!([])),
    ];
    assert_cases(&cases);
    assert!(failure("${quantity('100m').asInteger()}").contains("cannot convert value to integer"));
    assert!(failure("${quantity('200K')}").contains("is not a quantity"));
    assert!(failure("${'abc'.find('(')}").contains("illegal regex"));
}

/// Each value is the one kro v0.9.4 gives.
#[test]
fn kubernetes_list_functions_are_kros() {
    let cases = [
        ("${[1, 2, 3].sum()}", json!(6)),
        ("${[1.5, 2.0].sum()}", json!(3.5)),
        ("${[].sum()}", json!(0)),
        ("${[3, 1, 2].max()}", json!(3)),
        ("${[3, 1, 2].min()}", json!(1)),
        ("${['b', 'a'].min()}", json!("a")),
        ("${[1, 2, 2, 3].isSorted()}", json!(true)),
        ("${[2, 1].isSorted()}", json!(false)),
        ("${[1, 2, 1].indexOf(1)}", json!(0)),
        ("${[1, 2, 1].lastIndexOf(1)}", json!(2)),
        ("${[1, 2].indexOf(5)}", json!(-1)),
        ("${'abcb'.indexOf('b')}", json!(1)),
        ("${string([100, 200, 300].sum())}", json!("600")),
    ];
    assert_cases(&cases);
    assert!(failure("${[].max()}").contains("max called on empty list"));
}

#[test]
fn omit_leaves_out_the_field_it_is_the_whole_value_of() {
    let omitted = parse("${schema.spec.replicas > 2 ? omit() : 1}").unwrap();
    let schema = schema();
    assert_eq!(omitted.evaluate(|name| schema.get(name)), Ok(None));
    assert!(failure("replicas: ${omit()}").contains("whole value of a field"));
    assert!(failure("${[omit()]}").contains("whole value of a field"));
}

#[test]
fn errors_say_where_and_what() {
    assert_eq!(
        eval("name: ${schema.spec.name", schema()),
        Err(CelError::Unclosed { column: 7 })
    );
    let Err(CelError::Parse { column, expression, .. }) = eval("a ${schema.spec.(}", schema()) else {
        panic!("a parse error")
    };
    assert_eq!((column, expression.as_str()), (3, "schema.spec.("));
    assert_eq!(
        eval("${schema.spec.missing}", schema()),
        Err(CelError::Missing {
            expression: "schema.spec.missing".into(),
            name: "missing".into()
        })
    );
    assert_eq!(
        eval("${absent.status}", schema()),
        Err(CelError::Missing {
            expression: "absent.status".into(),
            name: "absent".into()
        })
    );
    let Err(CelError::Evaluate { expression, .. }) = eval("${schema.spec.name + 1}", schema()) else {
        panic!("an evaluation error")
    };
    assert_eq!(expression, "schema.spec.name + 1");
}

/// One case for each function the book's table (`docs/src/concepts/cel.md`) lists that
/// the cases above do not call.
#[test]
fn the_books_functions_are_there() {
    let cases = [
        (
            "${'ab'.contains('b') && 'ab'.startsWith('a') && 'ab'.endsWith('b')}",
            json!(true),
        ),
        (
            "${[int('3'), uint(3) == 3u, double(1) == 1.0, bool('true')]}",
            json!([3, true, true, true]),
        ),
        ("${string(bytes('a'))}", json!("a")),
        ("${type(1) == int}", json!(true)),
        ("${[1, 2, 3].exists_one(x, x == 2)}", json!(true)),
        (
            "${optional.of(1).hasValue() && !optional.none().hasValue() && optional.of(2).value() == 2}",
            json!(true),
        ),
        ("${{'a': 1}[?'b'].orValue(0)}", json!(0)),
        (
            "${'abc'.charAt(1) + 'abc'.upperAscii() + string('abcb'.indexOf('b')) + string('abcb'.lastIndexOf('b'))}",
            json!("bABC13"),
        ),
        (
            "${' a '.trim() + 'aXa'.replace('X', '-') + 'ab'.reverse()}",
            json!("aa-aba"),
        ),
        ("${'%s-%d'.format(['a', 1]) + strings.quote('q')}", json!("a-1\"q\"")),
        ("${[[1], [2, 2]].flatten().distinct().reverse()}", json!([2, 1])),
        ("${[3, 1, 2].sort()}", json!([1, 2, 3])),
        (
            "${[math.greatest(1, 5), math.least(1, 5), math.abs(-2), math.sign(-3)]}",
            json!([5, 1, 2, -1]),
        ),
        (
            "${[math.ceil(1.2), math.floor(1.8), math.round(1.5), math.trunc(1.7), math.sqrt(4.0)]}",
            json!([2, 1, 2, 1, 2]),
        ),
        (
            "${[math.isNaN(0.0/0.0), math.isInf(1.0/0.0), math.isFinite(1.0), math.bitAnd(6, 3) == 2]}",
            json!([true, true, true, true]),
        ),
        ("${string(base64.decode('d2Vi'))}", json!("web")),
        ("${dyn(1) == 1}", json!(true)),
    ];
    assert_cases(&cases);
}

/// What the book's table says is not offered does not compile, naming the function; a
/// function nobody offers fails when it runs, naming it.
#[test]
fn what_the_book_says_is_missing_is_refused_naming_it() {
    for (text, name) in [
        ("${url('https://a').getHost()}", "url"),
        ("${ip('10.0.0.1').family()}", "ip"),
        ("${cidr('10.0.0.0/8').containsIP('10.0.0.1')}", "cidr"),
        ("${semver('1.2.3').major()}", "semver"),
        ("${[1].transformList(i, v, v)}", "transformList"),
        ("${cel.bind(x, 1, x)}", "bind"),
        ("${duration('1h')}", "duration"),
        ("${timestamp('2026-01-01T00:00:00Z')}", "timestamp"),
    ] {
        let Err(CelError::Parse { message, .. }) = parse(text) else {
            panic!("{text} compiles")
        };
        assert!(
            message.contains(&format!("does not offer `{name}`")),
            "{text}: {message}"
        );
    }
    let err = eval("${nothing(1)}", schema()).unwrap_err();
    assert!(
        matches!(err, CelError::Evaluate { .. }),
        "not absent but an error: {err:?}"
    );
    assert!(err.to_string().contains("no function `nothing`"), "{err}");
}
