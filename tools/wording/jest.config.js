// The wording check's own test: fixture trees with operator texts that name a function, a DI token or an internal class, and texts that must pass.
module.exports = { ...require('../../jest.preset.js') };
