// The console's detail.js as the desktop window imports it (./console/detail.js,
// served from console.Assets()); tsconfig.json's rootDirs maps it here.
export * from '../../../web/assets/detail.js';
