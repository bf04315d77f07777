// swift-tools-version:5.9
// Companion's iOS side (see ../src/lib.rs). tauri-plugin's build step, on a Mac building for
// iOS, copies Tauri's own Swift package to ../.tauri/tauri-api and links the library product
// below, which must carry the Cargo package's name. Tools 5.9: `.iOS(.v17)` is PackageDescription
// 5.9's (SwiftPM refuses it below that); scripts/check-swift loads this manifest.

import PackageDescription

let package = Package(
  name: "tauri-plugin-companion-mobile",
  platforms: [
    .iOS(.v17)
  ],
  products: [
    .library(
      name: "tauri-plugin-companion-mobile",
      type: .static,
      targets: ["tauri-plugin-companion-mobile"])
  ],
  dependencies: [
    .package(name: "Tauri", path: "../.tauri/tauri-api")
  ],
  targets: [
    .target(
      name: "tauri-plugin-companion-mobile",
      dependencies: [
        .byName(name: "Tauri")
      ],
      path: "Sources/CompanionMobile")
  ]
)
