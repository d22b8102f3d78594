// The Go-template subset of a task's template block: each action, the
// functions with Go's and consul-template's meanings, trimming, delimiters,
// `${…}` of the task's variables, and errors with their line and column —
// hostile input (deep nesting, huge ranges) included.
import { GO_TEMPLATE_LIMITS, GoTemplateError, parseGoTemplate, type RenderContext } from './go-template';

const render = (text: string, ctx: Partial<RenderContext> = {}, delims: { left?: string; right?: string } = {}): string =>
  parseGoTemplate(text, { name: '"local/t"', leftDelimiter: delims.left, rightDelimiter: delims.right }).render({ env: {}, ...ctx });

const parseError = (text: string): GoTemplateError => {
  try {
    parseGoTemplate(text, { name: '"local/t"' });
  } catch (err) {
    if (err instanceof GoTemplateError) return err;
    throw err;
  }
  throw new Error(`parsed: ${text}`);
};

const renderError = (text: string, ctx: Partial<RenderContext> = {}): GoTemplateError => {
  const t = parseGoTemplate(text, { name: '"local/t"' });
  try {
    t.render({ env: {}, ...ctx });
  } catch (err) {
    if (err instanceof GoTemplateError) return err;
    throw err;
  }
  throw new Error(`rendered: ${text}`);
};

describe('Go templates: text and values', () => {
  it('passes text without actions through as it is', () => {
    expect(render('plain text\n  with lines\n')).toBe('plain text\n  with lines\n');
    expect(render('')).toBe('');
  });

  it('prints literals as Go does', () => {
    expect(render('{{ "a\\tb\\n" }}|{{ `raw\\n` }}|{{ 42 }}|{{ -7 }}|{{ 1.5 }}|{{ 0x1F }}|{{ 1_000 }}|{{ true }}|{{ false }}')).toBe(
      'a\tb\n|raw\\n|42|-7|1.5|31|1000|true|false',
    );
    expect(render('{{ "\\u00e9\\x41\\101" }}')).toBe('éAA');
    expect(render('{{ nil }}')).toBe('<no value>');
  });

  it('reads env from the task environment, a missing name as ""', () => {
    expect(render('host={{ env "HOST" }} none=[{{ env "NOPE" }}]', { env: { HOST: 'h1' } })).toBe('host=h1 none=[]');
    expect(render('{{ "HOST" | env }}', { env: { HOST: 'h1' } })).toBe('h1');
  });

  it('prints a list as Go does', () => {
    expect(render('{{ split "," "a,b,c" }}')).toBe('[a b c]');
  });
});

describe('Go templates: trimming and comments', () => {
  it('{{- trims white space before and -}} after, newlines included', () => {
    expect(render('a  \n {{- "b" -}} \n\t c')).toBe('abc');
    expect(render('a {{- "b" }} c')).toBe('ab c');
    expect(render('a {{ "b" -}} c')).toBe('a bc');
  });

  it('a dash without a space is a negative number, not a trim marker', () => {
    expect(render('a {{-3}} b')).toBe('a -3 b');
  });

  it('comments print nothing, and trim with markers', () => {
    expect(render('a{{/* a comment {{ "x" }} */}}b')).toBe('ab');
    expect(render('a \n{{- /* trimmed */ -}}\n b')).toBe('ab');
  });

  it('an unclosed comment or one followed by code is an error with its position', () => {
    expect(parseError('x\n  {{/* open').message).toBe(
      'template "local/t" line 2, column 3: comment is not closed (a comment is {{/* … */}})',
    );
    expect(parseError('{{/* c */ "x" }}').reason).toMatch(/comment ends before the closing delimiter/);
  });
});

describe('Go templates: control structures', () => {
  it('if / else if / else / end, with Go truth', () => {
    const t = '{{ if eq (env "M") "a" }}A{{ else if eq (env "M") "b" }}B{{ else }}other{{ end }}';
    expect(render(t, { env: { M: 'a' } })).toBe('A');
    expect(render(t, { env: { M: 'b' } })).toBe('B');
    expect(render(t, { env: { M: 'c' } })).toBe('other');
    expect(
      render(
        '{{ if "" }}y{{ else }}n{{ end }}{{ if 0 }}y{{ else }}n{{ end }}{{ if split "," "" }}y{{ else }}n{{ end }}{{ if "x" }}y{{ end }}',
      ),
    ).toBe('nnny');
  });

  it('with sets the dot to its value, and else runs for an empty one', () => {
    expect(render('{{ with env "A" }}a={{ . }}{{ else }}no a{{ end }}', { env: { A: '1' } })).toBe('a=1');
    expect(render('{{ with env "A" }}a={{ . }}{{ else }}no a{{ end }}')).toBe('no a');
    expect(render('{{ with env "A" }}A{{ else with env "B" }}B={{ . }}{{ end }}', { env: { B: '2' } })).toBe('B=2');
  });

  it('range over a split list, with index and element variables, and else for an empty list', () => {
    const env = { HOSTS: 'a, b,c ' };
    expect(render('{{ range split "," (env "HOSTS") }}[{{ trimSpace . }}]{{ end }}', { env })).toBe('[a][b][c]');
    expect(render('{{ range $i, $h := env "HOSTS" | split "," }}{{ $i }}={{ $h | trimSpace }};{{ end }}', { env })).toBe('0=a;1=b;2=c;');
    expect(render('{{ range $h := split "," "x,y" }}{{ $h }}{{ end }}')).toBe('xy');
    expect(render('{{ range split "," (env "NONE") }}x{{ else }}none{{ end }}')).toBe('none');
  });

  it('range over something that is not a list is a render error naming the line', () => {
    expect(renderError('\n{{ range "abc" }}x{{ end }}').message).toMatch(/line 2, column 4: range can't iterate over abc/);
  });

  it('an unclosed structure, a stray end or else is an error', () => {
    expect(parseError('{{ if true }}x').reason).toBe('{{ if }} is not closed with {{ end }}');
    expect(parseError('x{{ end }}').reason).toBe('{{ end }} without an if, with or range to close');
    expect(parseError('{{ else }}').reason).toBe('{{ else }} without an if, with or range to close');
    expect(parseError('{{ range $x := split "," "a" }}{{ else if true }}{{ end }}').reason).toMatch(/unexpected "if"/);
  });
});

describe('Go templates: variables', () => {
  it('declares, assigns and reads variables with Go scope', () => {
    expect(render('{{ $x := "a" }}{{ $x }}{{ $x = "b" }}{{ $x }}')).toBe('ab');
    // A variable declared inside a structure ends with it; an assignment reaches the outer one.
    expect(render('{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ $y := 3 }}{{ $y }}{{ end }}{{ $x }}')).toBe('32');
    expect(render('{{ $n := 0 }}{{ range split "," "a,b,c" }}{{ $n = . }}{{ end }}{{ $n }}')).toBe('c');
  });

  it('refuses a variable used before it is declared, or out of its scope', () => {
    expect(parseError('{{ $x }}').reason).toBe('undefined variable $x');
    expect(parseError('{{ if true }}{{ $y := 1 }}{{ end }}{{ $y }}').reason).toBe('undefined variable $y');
    expect(parseError('{{ $z = 1 }}').reason).toBe('variable $z is assigned before it is declared with :=');
    expect(parseError('{{ $a, $b := 1 }}').reason).toBe('only a range declares two variables');
  });
});

describe('Go templates: functions', () => {
  it('string functions', () => {
    expect(
      render(
        '{{ "  x y  " | trimSpace }}|{{ toUpper "ab" }}|{{ "AB" | toLower }}|{{ replaceAll "." "_" "a.b.c" }}|{{ "a.b" | replaceAll "." "-" }}',
      ),
    ).toBe('x y|AB|ab|a_b_c|a-b');
    expect(render('{{ split "," "a,b" | join ";" }}|{{ join "+" (split "" "abc") }}')).toBe('a;b|a+b+c');
  });

  it('base64 both ways, and a bad input is an error naming the function and the line', () => {
    expect(render('{{ "héllo" | base64Encode }}|{{ base64Decode "aMOpbGxv" }}')).toBe('aMOpbGxv|héllo');
    expect(renderError('ok\n{{ base64Decode "not base64!" }}').message).toBe(
      'template "local/t" line 2, column 4: base64Decode: "not base64!" is not standard base64 (A–Z a–z 0–9 + /, padded with =)',
    );
    expect(renderError('{{ base64Decode "/w==" }}').reason).toMatch(/not UTF-8 text/);
  });

  it('toJSON and toYAML of literals and lists, as Go marshals them', () => {
    expect(render('{{ toJSON "a<b>&\\"c" }}|{{ toJSON 3 }}|{{ toJSON true }}|{{ split "," "a,b" | toJSON }}|{{ toJSON nil }}')).toBe(
      '"a\\u003cb\\u003e\\u0026\\"c"|3|true|["a","b"]|null',
    );
    expect(render('{{ split "," "a,true,3,x y" | toYAML }}')).toBe('- a\n- "true"\n- "3"\n- x y');
    expect(render('{{ toYAML "plain" }}|{{ toYAML "a: b" }}|{{ toYAML "" }}|{{ toYAML 1.5 }}|{{ split "," "" | toYAML }}')).toBe(
      'plain|"a: b"|""|1.5|[]',
    );
  });

  it("printf with %s %d %v %q and %%, with Go's marks for a wrong or missing argument", () => {
    expect(render('{{ printf "%s=%d %v %q 100%%" "k" 7 true "a\\"b\\n" }}')).toBe('k=7 true "a\\"b\\n" 100%');
    expect(render('{{ printf "%d|%s|%s" "x" 3 }}')).toBe('%!d(string=x)|%!s(int=3)|%!s(MISSING)');
    expect(render('{{ printf "%s" "a" "b" }}')).toBe('a%!(EXTRA string=b)');
    expect(render('{{ split "," "a,b" | printf "%q" }}')).toBe('["a" "b"]');
    expect(parseError('{{ printf "%x" 1 }}').reason).toBe('printf verb %x is not supported (only %s, %d, %v, %q and %%)');
  });

  it("comparisons and logic as Go's builtins", () => {
    expect(render('{{ eq 1 1 }} {{ eq "a" "b" "a" }} {{ ne "a" "b" }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt "b" "a" }} {{ ge 1 2 }}')).toBe(
      'true true true true true true false',
    );
    expect(render('{{ and "x" "" "y" }}|{{ and 1 2 }}|{{ or "" "y" }}|{{ or "" 0 }}|{{ not "" }}')).toBe('|2|y|0|true');
    // and/or stop at the first argument that decides, as Go's: the bad base64 is never decoded.
    expect(render('{{ or "x" (base64Decode "!") }}|{{ and "" (base64Decode "!") }}')).toBe('x|');
    expect(renderError('{{ lt 1 "a" }}').reason).toBe(
      'lt: incompatible types for comparison: int and string (compare numbers with numbers, strings with strings)',
    );
    expect(renderError('{{ eq "1" 1 }}').reason).toBe('eq: incompatible types for comparison: string and int');
  });

  it('parenthesised pipelines nest, and the piped value is the last argument', () => {
    expect(render('{{ printf "%s-%s" "a" ("b" | toUpper) }}')).toBe('a-B');
    expect(render('{{ "x" | printf "%s-%s" "a" }}')).toBe('a-x');
  });

  it('a wrong number of arguments is refused at parse, counting the piped value', () => {
    expect(parseError('{{ env }}').reason).toBe('env takes 1 argument (got 0)');
    expect(parseError('{{ "a" | split }}').reason).toBe('split takes 2 arguments (got 1, the piped value included)');
    expect(parseError('{{ not 1 2 }}').reason).toBe('not takes 1 argument (got 2)');
  });

  it('refuses any other function, naming it, its line and column, and what to use instead', () => {
    const consul = parseError('a\nb {{ key "app/config" }}');
    expect(consul).toMatchObject({ line: 2, column: 6 });
    expect(consul.message).toBe(
      'template "local/t" line 2, column 6: function "key" reads Consul, which csiplug does not use; put the value in the task\'s env and read it with {{ env "NAME" }}',
    );
    expect(parseError('{{ with secret "kv/x" }}{{ end }}').reason).toMatch(/^function "secret" reads Vault/);
    expect(parseError('{{ range nomadVarList }}{{ end }}').reason).toMatch(/^function "nomadVarList" reads Nomad's variables/);
    expect(parseError('{{ sprig_upper "x" }}').reason).toMatch(
      /^function "sprig_upper" is not supported \(csiplug's templates have: env, split/,
    );
    expect(parseError('{{ len "x" }}').reason).toMatch(/^function "len" is not supported/);
    expect(parseError('{{ define "x" }}{{ end }}').reason).toBe('named templates are not supported');
  });

  it('refuses field access, on the dot or a variable', () => {
    expect(parseError('{{ .Values.x }}').reason).toMatch(/^field access \.Values is not supported/);
    expect(parseError('{{ $x := 1 }}{{ $x.Name }}').reason).toMatch(/^field access \.Name is not supported/);
  });

  it('refuses values given arguments, and a value after |', () => {
    expect(parseError('{{ "a" "b" }}').reason).toBe('the string "a" is not a function: it takes no arguments');
    expect(parseError('{{ "a" | "b" }}').reason).toBe('the string "b" after | is not a function');
    expect(parseError('{{ }}').reason).toBe('empty action: give a value or a function');
  });
});

describe('Go templates: lexing errors', () => {
  it('reports unclosed actions, strings and parentheses, and stray characters', () => {
    expect(parseError('x {{ "a" ').reason).toBe('action is not closed with }}');
    expect(parseError('{{ "a }}').reason).toBe('string is not closed with "');
    expect(parseError('{{ (env "A" }}').reason).toBe('unexpected end of the action: ( is not closed with )');
    expect(parseError('{{ "a" ; }}').reason).toBe('unexpected ";" in an action');
    expect(parseError("{{ 'a' }}").reason).toMatch(/character constants/);
    expect(parseError('{{ "\\q" }}').reason).toBe('unknown escape \\q in a string');
  });

  it('a delimiter inside a string does not end the action', () => {
    expect(render('{{ "}}" }}')).toBe('}}');
  });
});

describe('Go templates: custom delimiters', () => {
  it("honours the template's delimiters and leaves {{ }} as text", () => {
    expect(render('[[ env "A" ]] {{ not an action }} [[- " x" -]] !', { env: { A: 'a' } }, { left: '[[', right: ']]' })).toBe(
      'a {{ not an action }} x!',
    );
  });
});

describe('Go templates: ${…} of the task variables', () => {
  const vars = { NOMAD_ALLOC_ID: 'a1', NOMAD_TASK_DIR: '/local' };

  it('replaces ${NAME} in text and in string literals; $${ is a literal ${', () => {
    expect(render('id=${NOMAD_ALLOC_ID} dir={{ printf "%s/x" "${NOMAD_TASK_DIR}" }} lit=$${HOME}', { vars })).toBe(
      'id=a1 dir=/local/x lit=${HOME}',
    );
  });

  it('inserts values as text, never as template actions', () => {
    expect(render('v=${V}', { vars: { V: '{{ env "SECRET" }}' }, env: { SECRET: 's' } })).toBe('v={{ env "SECRET" }}');
  });

  it('a name the task does not have is an error naming it, never passed through', () => {
    const err = renderError('ok\nx=${NOMAD_NOPE} y=${ALSO_NOPE}', { vars });
    expect(err.message).toMatch(
      /^template "local\/t" line 2, column 3: \$\{NOMAD_NOPE\} is not a variable of this task \(nor \$\{ALSO_NOPE\}\)/,
    );
  });

  it('without variables (a source file), ${…} is text', () => {
    expect(render('${X}')).toBe('${X}');
  });

  it("${ inside an action's code is refused", () => {
    expect(parseError('{{ ${X} }}').reason).toMatch(/^"\$\{" inside an action/);
  });
});

describe('Go templates: hostile input', () => {
  it('refuses nesting deeper than the limit, at parse', () => {
    const depth = GO_TEMPLATE_LIMITS.maxDepth + 1;
    const deep = '{{ if true }}'.repeat(depth) + '{{ end }}'.repeat(depth);
    expect(parseError(deep).reason).toBe(`nesting is deeper than ${GO_TEMPLATE_LIMITS.maxDepth} levels`);
    const parens = `{{ ${'('.repeat(depth)}1${')'.repeat(depth)} }}`;
    expect(parseError(parens).reason).toBe(`nesting is deeper than ${GO_TEMPLATE_LIMITS.maxDepth} levels`);
    const ok = GO_TEMPLATE_LIMITS.maxDepth;
    expect(render('{{ if true }}'.repeat(ok) + 'x' + '{{ end }}'.repeat(ok))).toBe('x');
  });

  it('stops a render that ranges over too many items', () => {
    const items = ','.repeat(1000); // 1001 items
    const t = `{{ range split "," (env "L") }}{{ range split "," (env "L") }}{{ end }}{{ end }}`;
    expect(renderError(t, { env: { L: `x${items}` } }).reason).toBe(
      `ranges go over more than ${GO_TEMPLATE_LIMITS.maxRangeItems} items in one render`,
    );
  });

  it('stops a render whose output grows past the limit', () => {
    const big = 'x'.repeat(1024 * 1024);
    const t = '{{ range split "," (env "L") }}{{ env "BIG" }}{{ end }}';
    expect(renderError(t, { env: { L: ','.repeat(20), BIG: big } }).reason).toBe(
      `output is over ${GO_TEMPLATE_LIMITS.maxOutputChars} characters`,
    );
  });

  it('refuses template text over the size limit', () => {
    expect(parseError('x'.repeat(GO_TEMPLATE_LIMITS.maxTemplateChars + 1)).reason).toMatch(/characters; at most/);
  });
});
