// The bounds check's own test: fixture trees that break each bound on purpose, and one that holds them all.
module.exports = { ...require('../../jest.preset.js') };
