// Shared jest settings: every package's jest.config.js spreads this.
// Type checking happens in each package's `lint` target (tsc over src and
// tests); jest itself transpiles file by file so test runs stay fast.
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: require('path').join(__dirname, 'tsconfig.jest.json') }],
  },
  moduleFileExtensions: ['ts', 'js', 'json'],
  testMatch: ['<rootDir>/src/**/*.spec.ts', '<rootDir>/test/**/*.test.ts'],
  setupFiles: ['reflect-metadata'],
  testTimeout: 30000,
};
