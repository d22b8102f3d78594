// Lint for the whole tree, with type information (each package's
// tsconfig.spec.json: its src and its tests). Only rules that catch real
// bugs or keep a house rule are on; layout is prettier's job, not eslint's.
// `npm run lint` runs this with --max-warnings 0: every rule is an error.
import tseslint from 'typescript-eslint';

/** The house error rules (top of packages/core/src/errors.ts), enforced outside core. */
const errorRules = [
  {
    selector: "NewExpression[callee.name='CsiplugError']",
    message:
      'No `new CsiplugError(code, …)` at a throw site: make (or reuse) a class that extends CsiplugError, as packages/core/src/errors.ts says.',
  },
  {
    selector: "ClassBody > PropertyDefinition[key.name='httpStatus']",
    message:
      "Errors do not know HTTP: give the error a code whose shape says its kind (_NOT_FOUND, _EXISTS, _CONFLICT…) and let the API's statusForError map it.",
  },
  {
    selector: "ClassBody > MethodDefinition[kind='constructor'] TSParameterProperty > Identifier[name='httpStatus']",
    message:
      "Errors do not know HTTP: give the error a code whose shape says its kind (_NOT_FOUND, _EXISTS, _CONFLICT…) and let the API's statusForError map it.",
  },
];

export default tseslint.config(
  {
    ignores: ['**/node_modules/**', '**/dist/**', '**/coverage/**', 'packages/csi/src/generated/**', '**/*.js', '**/*.cjs', '**/*.mjs'],
  },
  {
    files: ['packages/*/src/**/*.ts', 'packages/*/test/**/*.ts', 'packages/*/image/**/*.ts', 'tools/*/test/**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        project: ['./packages/*/tsconfig.spec.json', './tools/*/tsconfig.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      // The rules the tree's own eslint-disable comments name, so that those comments mean something.
      '@typescript-eslint/no-namespace': 'error',
      '@typescript-eslint/no-require-imports': ['error', { allowAsImport: true }],
      'no-control-regex': 'error',
      'no-restricted-syntax': ['error', ...errorRules],
    },
  },
  {
    // Core defines the base error and its kinds; tests may build a bare CsiplugError to feed code that maps codes.
    files: ['packages/core/src/**/*.ts', '**/*.spec.ts', '**/test/**/*.ts'],
    rules: { 'no-restricted-syntax': 'off' },
  },
);
