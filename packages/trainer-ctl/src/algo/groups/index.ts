export * from './types';
export { anchorGroupId } from './branch';
export { groupKind } from './registry';
export { GroupsSchema, type GroupsSettings } from '../../config/sections/groups';
