// The layering check's own test: fixture trees with wrong imports, and the real tree.
module.exports = { ...require('../../jest.preset.js') };
